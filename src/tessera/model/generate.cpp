#include "tessera/model/generate.h"

#include <algorithm>
#include <memory>

#include "tessera/core/error.h"
#include "tessera/kernels/moe_stats.h"
#include "tessera/kernels/ops.h"
#include "tessera/model/moe_layer.h"

namespace tessera {

Decoder::Decoder(const GPT& model) : model_(model) {
  const ParamLayout& L = model.layout();
  const GPTConfig& c = model.config();
  TESSERA_CHECK(L.tp() == 1 && L.has_embedding() && L.has_head() &&
                    int64_t(L.layers().size()) == c.num_layers,
                "generation needs the whole model on one rank (tp = 1, one pipeline stage)");
  C_ = c.hidden_size;
  F_ = c.ffn();
  Ff_ = c.fc_width();
  V_ = c.vocab_size;
  // The heads the training forward gives attention (ActShape::heads at tp 1).
  heads_ = {c.num_heads, c.kv_heads(), c.head_size(), c.rope() ? c.rotary_base : 0.0f};
  Cq_ = heads_.q_width();
  KVW_ = heads_.kv_width();
  QKV_ = heads_.qkv_width();
  cache_.init(c.num_layers, c.positions(), KVW_);
  logits_.resize(size_t(V_));
}

void Decoder::resize(int64_t n) {
  auto fit = [](std::vector<float>& v, int64_t size) {
    if (int64_t(v.size()) < size) v.resize(size_t(size));
  };
  fit(x_, n * C_);
  fit(ln_, n * C_);
  fit(mean_, n);
  fit(rstd_, n);
  fit(qkv_, n * QKV_);
  fit(atty_, n * Cq_);
  fit(tmp_, n * C_);
  fit(fch_, n * Ff_);
  fit(act_, n * F_);
  if (model_.config().moe()) {
    const GPTConfig& c = model_.config();
    const int64_t E = c.num_experts, K = c.moe_router_topk;
    auto fit_i = [](std::vector<int32_t>& v, int64_t size) {
      if (int64_t(v.size()) < size) v.resize(size_t(size));
    };
    fit(moe_logits_, n * E);
    fit_i(moe_idx_, n * K);
    fit(moe_gates_, n * K);
    fit_i(moe_slot_, n * K);
    fit_i(moe_counts_, E);
    fit(moe_stats_, kernels::kMoeStats + E);
    fit(moe_xs_, n * K * C_);
    fit(moe_h_, n * K * Ff_);
    fit(moe_act_, n * K * F_);
    fit(moe_ys_, n * K * C_);
    if (c.moe_shared()) {
      fit(moe_sh_h_, n * c.moe_shared_fc_width());
      fit(moe_sh_act_, n * c.moe_shared_expert_intermediate_size);
      fit(moe_sh_y_, n * C_);
      fit(moe_sh_gate_, n);
    }
  }
}

void Decoder::moe_mlp(const kernels::Ops& ops, const LayerWeights& lw, int64_t n) {
  // The training layer's own kernels (model/moe_layer.h) on the n new rows,
  // dropless: every token reaches its top-k experts (capacity n), as
  // inference with Mixtral or Qwen-MoE runs; a --moe-expert-capacity-factor
  // limits a training micro-batch, not what the model computes for a token.
  ActShape s = model_.act_shape(1, n);
  s.capacity = n;
  MoeActs m;
  m.logits = moe_logits_.data();  // (n, E)
  m.idx = moe_idx_.data();        // (n, K)
  m.gates = moe_gates_.data();    // (n, K)
  m.slot = moe_slot_.data();      // (n, K)
  m.counts = moe_counts_.data();  // (E)
  m.stats = moe_stats_.data();    // (kMoeStats + E)
  m.xs = moe_xs_.data();          // (n K, C)
  m.h = moe_h_.data();            // (n K, Ff)
  m.act = moe_act_.data();        // (n K, F)
  m.ys = moe_ys_.data();          // (n K, C)
  if (s.S > 0) {  // the shared expert on every new row, added as in training
    m.sh_h = moe_sh_h_.data();        // (n, Sf)
    m.sh_act = moe_sh_act_.data();    // (n, S)
    m.sh_y = moe_sh_y_.data();        // (n, C)
    m.sh_gate = moe_sh_gate_.data();  // (n)
  }
  moe_mlp_forward(ops, lw, m, EpMoeActs{}, TensorParallel{}, ln_.data(), tmp_.data(),
                  s);  // one process: no ep, no tp
}

void Decoder::norm(const kernels::Ops& ops, float* out, const float* x, const float* w,
                   const float* b, int64_t rows) {
  const GPTConfig& c = model_.config();
  if (c.rmsnorm())
    ops.rmsnorm_forward(out, rstd_.data(), x, w, rows, C_, c.norm_epsilon);
  else
    ops.layernorm_forward(out, mean_.data(), rstd_.data(), x, w, b, rows, C_);
}

const float* Decoder::forward(const int32_t* tokens, int64_t n) {
  const kernels::Ops ops(model_.backend(), nullptr);  // the model's kernels, not profiled
  TESSERA_CHECK(n >= 1, "Decoder::forward: no tokens");
  const int64_t pos0 = cache_.len, C = C_, KVW = KVW_, QKV = QKV_;
  TESSERA_CHECK(pos0 + n <= cache_.max_T, "Decoder: {} positions exceed the context of {}",
                pos0 + n, cache_.max_T);
  for (int64_t i = 0; i < n; ++i)
    TESSERA_CHECK(tokens[i] >= 0 && tokens[i] < V_, "token id {} outside the vocabulary ({})",
                  tokens[i], V_);
  resize(n);
  const GPTConfig& c = model_.config();
  const ModelWeights& w = model_.weights();
  float* x = x_.data();  // (n, C)
  ops.token_embedding_forward(x, tokens, w.wte, n, C, 0, model_.layout().padded_vocab());
  // Learned positions are added here; RoPE's are rotations inside attention.
  if (!c.rope()) ops.position_embedding_forward(x, w.wpe, 1, n, C, pos0);

  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& lw = w.layers[l];
    float* kc = cache_.keys(int64_t(l));    // (max_T, KVW)
    float* vc = cache_.values(int64_t(l));  // (max_T, KVW)
    // Attention: the n new queries see the cache plus themselves, causally.
    norm(ops, ln_.data(), x, lw.ln1_w, lw.ln1_b, n);
    ops.matmul_forward(qkv_.data(), ln_.data(), lw.qkv_w, lw.qkv_b, n, C, QKV);  // (n, QKV)
    for (int64_t i = 0; i < n; ++i) {
      const float* row = qkv_.data() + i * QKV;  // [q: Cq | k: KVW | v: KVW]
      ops.copy(kc + (pos0 + i) * KVW, row + Cq_, KVW, Op::Attention);
      ops.copy(vc + (pos0 + i) * KVW, row + Cq_ + KVW, KVW, Op::Attention);
    }
    // Keys enter the cache rotated to their absolute positions pos0 + i, as
    // the training kernel rotates key j of a sequence to position j; the
    // query is rotated inside attention_decode to position len - 1.
    if (heads_.rope())
      ops.rope_rows(kc + pos0 * KVW, n, KVW, heads_.kv_heads, heads_.head_size, pos0,
                    heads_.rope_base);
    for (int64_t i = 0; i < n; ++i)
      ops.attention_decode(atty_.data() + i * Cq_, qkv_.data() + i * QKV, kc, vc, pos0 + i + 1,
                           heads_);
    ops.matmul_forward(tmp_.data(), atty_.data(), lw.proj_w, lw.proj_b, n, Cq_, C);
    ops.accumulate(x, tmp_.data(), n * C);
    // MLP: fc writes (n, F), or [gate | up] (n, 2F) under SwiGLU; an MoE
    // layer's experts in its place.
    norm(ops, ln_.data(), x, lw.ln2_w, lw.ln2_b, n);
    if (lw.moe()) {
      moe_mlp(ops, lw, n);
    } else {
      ops.matmul_forward(fch_.data(), ln_.data(), lw.fc_w, lw.fc_b, n, C, Ff_);
      if (c.swiglu)
        ops.swiglu_forward(act_.data(), fch_.data(), n, F_);
      else
        ops.gelu_forward(act_.data(), fch_.data(), n * F_);
      ops.matmul_forward(tmp_.data(), act_.data(), lw.fcproj_w, lw.fcproj_b, n, F_, C);
    }
    ops.accumulate(x, tmp_.data(), n * C);
  }
  cache_.len = pos0 + n;

  // Only the last position's logits are needed: the next token.
  const float* last = x + (n - 1) * C;
  norm(ops, ln_.data(), last, w.lnf_w, w.lnf_b, 1);
  // The LM head (wte when tied, lm_head when untied), its real rows only.
  const float* head = c.untie_embeddings ? w.lm_head : w.wte;
  ops.matmul_forward(logits_.data(), ln_.data(), head, nullptr, 1, C, V_);
  return logits_.data();
}

std::vector<float> logits_no_cache(GPT& model, const int32_t* tokens, int64_t n) {
  Activations acts;
  ActShape s = model.act_shape(1, n);
  s.capacity = n;  // MoE layers dropless, as the decoder runs them
  activations_init(acts, s);
  std::vector<int32_t> targets(size_t(n), -1);  // no loss wanted
  model.forward(acts, tokens, targets.data());
  const int64_t V = model.config().vocab_size;
  return std::vector<float>(acts.logits + (n - 1) * V, acts.logits + n * V);
}

std::vector<int32_t> generate(GPT& model, std::span<const int32_t> prompt,
                              const GenerateConfig& cfg,
                              const std::function<bool(int32_t)>& on_token) {
  TESSERA_CHECK(!prompt.empty(), "generation needs a non-empty prompt");
  const int64_t T = model.config().positions(), V = model.config().vocab_size;
  std::vector<int32_t> seq(prompt.begin(), prompt.end());
  // The window is seq[start:]; it never holds more than T tokens.
  int64_t start = std::max<int64_t>(0, int64_t(seq.size()) - T);
  std::unique_ptr<Decoder> dec;
  if (cfg.use_kv_cache) dec = std::make_unique<Decoder>(model);

  std::vector<float> logits;
  auto run_window = [&] {
    const int32_t* w = seq.data() + start;
    const int64_t n = int64_t(seq.size()) - start;
    if (dec) {
      dec->reset();
      const float* l = dec->forward(w, n);
      logits.assign(l, l + V);
    } else {
      logits = logits_no_cache(model, w, n);
    }
  };
  run_window();

  Rng rng{cfg.seed, 0x67656e /* "gen" */, 0};
  std::vector<int32_t> out;
  for (int64_t i = 0; i < cfg.max_new_tokens; ++i) {
    const int32_t tok = sample_token(logits.data(), V, cfg.sampling, rng);
    out.push_back(tok);
    seq.push_back(tok);
    if (on_token && !on_token(tok)) break;
    if (tok == cfg.stop_token || i + 1 == cfg.max_new_tokens) break;
    if (int64_t(seq.size()) - start > T) {
      // Full: keep the newest half and run it again (one prefill, then
      // cheap steps until it fills up again).
      start = int64_t(seq.size()) - std::max<int64_t>(1, T / 2);
      run_window();
    } else if (dec) {
      const float* l = dec->forward(&tok, 1);
      logits.assign(l, l + V);
    } else {
      run_window();
    }
  }
  return out;
}

}  // namespace tessera

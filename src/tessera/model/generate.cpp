#include "tessera/model/generate.h"

#include <algorithm>
#include <memory>

#include "tessera/core/error.h"
#include "tessera/kernels/ops.h"

namespace tessera {

Decoder::Decoder(const GPT& model) : model_(model) {
  const ParamLayout& L = model.layout();
  const GPTConfig& c = model.config();
  TESSERA_CHECK(L.tp() == 1 && L.has_embedding() && L.has_head() &&
                    int64_t(L.layers().size()) == c.num_layers,
                "generation needs the whole model on one rank (tp = 1, one pipeline stage)");
  // The cached decoder speaks GPT-2 (LayerNorm, GELU, learned positions, MHA).
  TESSERA_CHECK(!c.llama_family(),
                "generation with the KV cache supports GPT-2 models only; this model is {}",
                c.summary());
  C_ = c.hidden_size;
  NH_ = c.num_heads;
  F_ = c.ffn();
  V_ = c.vocab_size;
  cache_.init(c.num_layers, c.positions(), C_);
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
  fit(qkv_, n * 3 * C_);
  fit(atty_, n * C_);
  fit(tmp_, n * C_);
  fit(fch_, n * F_);
  fit(gelu_, n * F_);
}

const float* Decoder::forward(const int32_t* tokens, int64_t n) {
  const kernels::Ops ops(model_.backend(), nullptr);  // the model's kernels, not profiled
  TESSERA_CHECK(n >= 1, "Decoder::forward: no tokens");
  const int64_t pos0 = cache_.len, C = C_;
  TESSERA_CHECK(pos0 + n <= cache_.max_T, "Decoder: {} positions exceed the context of {}",
                pos0 + n, cache_.max_T);
  for (int64_t i = 0; i < n; ++i)
    TESSERA_CHECK(tokens[i] >= 0 && tokens[i] < V_, "token id {} outside the vocabulary ({})",
                  tokens[i], V_);
  resize(n);
  const ModelWeights& w = model_.weights();
  float* x = x_.data();  // (n, C)
  ops.token_embedding_forward(x, tokens, w.wte, n, C, 0, model_.layout().padded_vocab());
  ops.position_embedding_forward(x, w.wpe, 1, n, C, pos0);

  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& lw = w.layers[l];
    float* kc = cache_.keys(int64_t(l));    // (max_T, C)
    float* vc = cache_.values(int64_t(l));  // (max_T, C)
    // Attention: the n new queries see the cache plus themselves, causally.
    ops.layernorm_forward(ln_.data(), mean_.data(), rstd_.data(), x, lw.ln1_w, lw.ln1_b, n, C);
    ops.matmul_forward(qkv_.data(), ln_.data(), lw.qkv_w, lw.qkv_b, n, C, 3 * C);  // (n, 3C)
    for (int64_t i = 0; i < n; ++i) {
      const float* row = qkv_.data() + i * 3 * C;  // [q | k | v]
      std::copy_n(row + C, C, kc + (pos0 + i) * C);
      std::copy_n(row + 2 * C, C, vc + (pos0 + i) * C);
    }
    for (int64_t i = 0; i < n; ++i)
      ops.attention_decode(atty_.data() + i * C, qkv_.data() + i * 3 * C, kc, vc, pos0 + i + 1, C,
                           NH_);
    ops.matmul_forward(tmp_.data(), atty_.data(), lw.proj_w, lw.proj_b, n, C, C);
    ops.add(x, x, tmp_.data(), n * C);
    // MLP.
    ops.layernorm_forward(ln_.data(), mean_.data(), rstd_.data(), x, lw.ln2_w, lw.ln2_b, n, C);
    ops.matmul_forward(fch_.data(), ln_.data(), lw.fc_w, lw.fc_b, n, C, F_);
    ops.gelu_forward(gelu_.data(), fch_.data(), n * F_);
    ops.matmul_forward(tmp_.data(), gelu_.data(), lw.fcproj_w, lw.fcproj_b, n, F_, C);
    ops.add(x, x, tmp_.data(), n * C);
  }
  cache_.len = pos0 + n;

  // Only the last position's logits are needed: the next token.
  const float* last = x + (n - 1) * C;
  ops.layernorm_forward(ln_.data(), mean_.data(), rstd_.data(), last, w.lnf_w, w.lnf_b, 1, C);
  ops.matmul_forward(logits_.data(), ln_.data(), w.wte, nullptr, 1, C, V_);  // tied head, real rows
  return logits_.data();
}

std::vector<float> logits_no_cache(GPT& model, const int32_t* tokens, int64_t n) {
  Activations acts;
  activations_init(acts, model.act_shape(1, n));
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

// Generation for the Llama family (issue 17): the KV-cache decoder agrees
// with the training forward (GPT::forward, via logits_no_cache) for every
// combination of the architecture's switches — RMSNorm, SwiGLU, RoPE,
// grouped-query attention, untied head, no linear biases — alone and
// together, after a prefill, a second multi-token chunk and single-token
// steps; greedy generation is the same with and without the cache, across
// the sliding window too (whose re-run restarts at position 0, as the full
// forward of the window does). Mixture-of-experts models too (dropless).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "tessera/core/rng.h"
#include "tessera/model/generate.h"
#include "tiny_model.h"

namespace tessera {
namespace {

struct Arch {
  std::string name;
  GPTConfig cfg;
};
void PrintTo(const Arch& a, std::ostream* os) { *os << a.name; }

// tiny_gpt / tiny_llama (hidden 32, 4 heads of 8, 2 layers, vocabulary 67)
// with a 24-token context and weights large enough (std 0.3) that attention
// is sharp and depends on where each key is, so a key rotated to the wrong
// position changes the logits well beyond the tolerance.
GPTConfig small(GPTConfig c) {
  c.seq_length = 24;
  c.init_std = 0.3f;
  return c;
}

std::vector<Arch> archs() {
  std::vector<Arch> a;
  a.push_back({"Llama", small(test::tiny_llama())});  // every switch: GQA 4/2, RoPE, RMSNorm, SwiGLU, untied, no bias
  {
    GPTConfig c = small(test::tiny_gpt());
    c.position_embedding = PositionEmbedding::Rope;
    a.push_back({"GptWithRope", c});
  }
  {
    GPTConfig c = small(test::tiny_gpt());
    c.num_query_groups = 2;  // GQA with LayerNorm, GELU, learned positions, biases, tied
    a.push_back({"GqaWithLayerNorm", c});
  }
  {
    GPTConfig c = small(test::tiny_gpt());
    c.normalization = Normalization::RMSNorm;
    c.norm_epsilon = 1e-2f;  // large enough to matter: the decoder must take it from the config
    c.swiglu = true;
    c.untie_embeddings = true;  // biases kept, learned positions, MHA
    a.push_back({"RmsSwigluUntiedWithBias", c});
  }
  {
    GPTConfig c = small(test::tiny_gpt());
    c.num_query_groups = 1;  // multi-query: one kv head for all four
    c.position_embedding = PositionEmbedding::Rope;
    c.rotary_base = 500.0f;
    c.add_bias_linear = false;  // LayerNorm (with its bias), GELU
    c.untie_embeddings = true;  // (tied, this model repeats two tokens greedily)
    a.push_back({"MqaRopeNoBias", c});
  }
  a.push_back({"Gpt2", small(test::tiny_gpt())});
  // Mixtures of experts (docs/moe.md): the decoder runs the training
  // layer's routing and grouped GEMMs on the new rows, every token to its
  // top-k experts. GPT-2 blocks with only layer 0 an MoE layer (GELU experts
  // with biases), and a Llama-block MoE (SwiGLU experts, Mixtral's shape).
  {
    GPTConfig c = small(test::tiny_gpt());
    c.num_experts = 4;
    c.moe_router_topk = 2;
    c.moe_layer_freq = 2;
    c.untie_embeddings = true;  // (tied, this model repeats two tokens greedily)
    a.push_back({"MoeGptEveryOtherLayer", c});
  }
  {
    GPTConfig c = small(test::tiny_llama());
    c.num_experts = 4;
    c.moe_router_topk = 2;
    a.push_back({"MoeLlama", c});
  }
  {
    // A training capacity factor limits micro-batches, not generation: the
    // decoder and the full forward it is held to both run dropless.
    GPTConfig c = small(test::tiny_llama());
    c.num_experts = 4;
    c.moe_router_topk = 1;
    c.moe_capacity_factor = 0.5f;
    a.push_back({"MoeTop1WithCapacityFactor", c});
  }
  {
    // A gated shared expert beside the routed ones (Qwen2-MoE's shape):
    // the decoder adds it on every new row as training's layer does.
    GPTConfig c = small(test::tiny_llama());
    c.num_experts = 4;
    c.moe_router_topk = 2;
    c.moe_shared_expert_intermediate_size = 48;
    c.moe_shared_expert_gate = true;
    a.push_back({"MoeLlamaSharedExpertGate", c});
    // Qwen2-MoE's routing (--moe-router-pre-softmax: the full softmax's
    // top-k as gates) and q, k, v biases: the decoder routes as training does.
    c.moe_router_pre_softmax = true;
    c.add_qkv_bias = true;
    a.push_back({"MoeQwen2PreSoftmax", c});
  }
  return a;
}

// A model of cfg with random weights: GPT-2 initialisation at the config's
// std, then every bias and norm parameter drawn too (init leaves them 0 and
// 1, which would hide a missing bias or norm bias).
struct RandomModel {
  GPTConfig cfg;
  ParamLayout layout;
  GPT model;
  RandomModel(const GPTConfig& c, uint64_t seed)
      : cfg(c), layout(ParamLayout::build(cfg, ParallelConfig{}, 0, 0)), model(cfg, layout) {
    model.init(seed);
    float* p = model.params().f32();
    uint64_t stream = 100;
    for (const ParamEntry& e : layout.entries()) {
      ++stream;
      const bool bias = e.name.ends_with(".bias");
      const bool norm_gain = e.name.find("ln_") != std::string::npos && !bias;
      if (!bias && !norm_gain) continue;
      for (int64_t i = 0; i < e.numel(); ++i)
        p[e.offset + i] = (norm_gain ? 1.0f : 0.0f) + 0.2f * rng_normal(seed, stream, uint64_t(i));
    }
  }
};

std::vector<int32_t> tokens_of(int64_t n, int64_t V, uint64_t seed) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = int32_t(rng_u64(seed, 1, uint64_t(i)) % uint64_t(V));
  return p;
}

// max |a - b| / max |b| over the vocabulary.
double rel_err(const float* a, const std::vector<float>& b) {
  double err = 0, scale = 0;
  for (size_t v = 0; v < b.size(); ++v) {
    err = std::max(err, double(std::fabs(a[v] - b[v])));
    scale = std::max(scale, double(std::fabs(b[v])));
  }
  return err / scale;
}

constexpr double kTol = 1e-5;

class GenerateArch : public ::testing::TestWithParam<Arch> {};

TEST_P(GenerateArch, CachedLogitsMatchTheFullForward) {
  RandomModel m(GetParam().cfg, 5);
  const int64_t T = m.cfg.seq_length, V = m.cfg.vocab_size;
  ASSERT_EQ(m.cfg.positions(), T);
  const std::vector<int32_t> toks = tokens_of(T, V, 11);
  Decoder dec(m.model);
  // A 5-token prefill, a 3-token chunk (several rows entering the cache at
  // positions 5..7), then one position at a time up to the full context.
  const float* l = dec.forward(toks.data(), 5);
  for (int64_t n = 5; n <= T;) {
    const std::vector<float> ref = logits_no_cache(m.model, toks.data(), n);
    EXPECT_LT(rel_err(l, ref), kTol) << "after " << n << " tokens";
    if (n == T) break;
    const int64_t step = n == 5 ? 3 : 1;
    l = dec.forward(&toks[size_t(n)], step);
    n += step;
  }
  EXPECT_EQ(dec.length(), T);
}

// generate()'s window slide resets the decoder and re-runs the newest part
// of the sequence from position 0, which is what the full forward of that
// window computes: after a full cache, reset, the logits of a window taken
// from the middle of a longer sequence match the full forward of the window.
TEST_P(GenerateArch, AfterResetPositionsStartAtZero) {
  RandomModel m(GetParam().cfg, 6);
  const int64_t T = m.cfg.seq_length, V = m.cfg.vocab_size;
  const std::vector<int32_t> toks = tokens_of(2 * T, V, 12);
  Decoder dec(m.model);
  dec.forward(toks.data(), T);  // full
  dec.reset();
  const int32_t* window = toks.data() + T + 3;  // 12 tokens of the sequence's second half
  const float* l = dec.forward(window, T / 2);
  EXPECT_LT(rel_err(l, logits_no_cache(m.model, window, T / 2)), kTol);
  for (int64_t n = T / 2 + 1; n <= T - 3; ++n) {
    l = dec.forward(window + n - 1, 1);
    EXPECT_LT(rel_err(l, logits_no_cache(m.model, window, n)), kTol) << "window of " << n;
  }
}

TEST_P(GenerateArch, GreedyIsTheSameWithAndWithoutKVCache) {
  for (uint64_t seed : {1, 2}) {
    RandomModel m(GetParam().cfg, seed);
    // A short prompt, and one longer than the context (its newest 24 tokens
    // are the first window).
    for (int64_t prompt_len : {7, 30}) {
      const std::vector<int32_t> prompt = tokens_of(prompt_len, m.cfg.vocab_size, seed + 40);
      GenerateConfig g;
      g.max_new_tokens = 40;  // 7 + 40 > 24: the window slides (twice)
      g.sampling.temperature = 0;
      g.use_kv_cache = true;
      const std::vector<int32_t> cached = generate(m.model, prompt, g);
      g.use_kv_cache = false;
      const std::vector<int32_t> recomputed = generate(m.model, prompt, g);
      EXPECT_EQ(cached.size(), 40u);
      EXPECT_GE(std::set<int32_t>(cached.begin(), cached.end()).size(), 5u) << "degenerate model";
      EXPECT_EQ(cached, recomputed) << "seed " << seed << ", prompt of " << prompt_len;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, GenerateArch, ::testing::ValuesIn(archs()),
                         [](const ::testing::TestParamInfo<Arch>& i) { return i.param.name; });

}  // namespace
}  // namespace tessera

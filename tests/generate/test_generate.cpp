// Generation: the KV-cache decoder agrees with the training forward, greedy
// decoding gives the same tokens with and without the cache (also across
// the sliding window), and sampling is deterministic and honours
// temperature, top-k and top-p.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "tessera/core/rng.h"
#include "tessera/model/generate.h"
#include "tiny_model.h"

namespace tessera {
namespace {

struct SmallModel {
  GPTConfig cfg;
  ParamLayout layout;
  GPT model;
  static GPTConfig config() {
    GPTConfig c = test::tiny_gpt();
    c.seq_length = 24;
    return c;
  }
  explicit SmallModel(uint64_t seed)
      : cfg(config()), layout(ParamLayout::build(cfg, ParallelConfig{}, 0, 0)), model(cfg, layout) {
    model.init(seed);
    // A freshly initialised model with tied embeddings repeats one token
    // forever, which would make "same tokens" a weak test. Large position
    // embeddings make each step's choice depend on where it is, so greedy
    // sequences vary (checked below).
    const ParamEntry& e = layout.find("wpe");
    for (int64_t i = 0; i < e.numel(); ++i)
      model.params().f32()[e.offset + i] = rng_normal(seed, 7, uint64_t(i));
  }
};

std::vector<int32_t> prompt_of(int64_t n, int64_t V, uint64_t seed) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = int32_t(rng_u64(seed, 1, uint64_t(i)) % uint64_t(V));
  return p;
}

TEST(Decoder, CachedLogitsMatchTheFullForward) {
  SmallModel m(3);
  const int64_t V = m.cfg.vocab_size;
  std::vector<int32_t> toks = prompt_of(m.cfg.seq_length, V, 9);
  Decoder dec(m.model);
  // A 5-token prefill, then one position at a time.
  const float* l = dec.forward(toks.data(), 5);
  for (int64_t n = 5; n <= int64_t(toks.size()); ++n) {
    if (n > 5) l = dec.forward(&toks[size_t(n - 1)], 1);
    std::vector<float> ref = logits_no_cache(m.model, toks.data(), n);
    double err = 0, scale = 0;
    for (int64_t v = 0; v < V; ++v) {
      err = std::max(err, double(std::fabs(l[v] - ref[size_t(v)])));
      scale = std::max(scale, double(std::fabs(ref[size_t(v)])));
    }
    EXPECT_LT(err, 1e-4 * scale) << "position " << n;
  }
  EXPECT_EQ(dec.length(), m.cfg.seq_length);
}

TEST(Generate, GreedyIsTheSameWithAndWithoutKVCache) {
  for (uint64_t seed : {1, 2, 3}) {
    SmallModel m(seed);
    std::vector<int32_t> prompt = prompt_of(7, m.cfg.vocab_size, seed);
    GenerateConfig g;
    g.max_new_tokens = 40;  // 7 + 40 > 24: the window slides twice
    g.sampling.temperature = 0;
    g.use_kv_cache = true;
    std::vector<int32_t> cached = generate(m.model, prompt, g);
    g.use_kv_cache = false;
    std::vector<int32_t> recomputed = generate(m.model, prompt, g);
    EXPECT_EQ(cached.size(), 40u);
    EXPECT_GE(std::set<int32_t>(cached.begin(), cached.end()).size(), 5u) << "degenerate model";
    EXPECT_EQ(cached, recomputed) << "seed " << seed;
  }
}

TEST(Generate, TopKOneIsGreedyAndSamplingIsDeterministic) {
  SmallModel m(4);
  std::vector<int32_t> prompt = prompt_of(3, m.cfg.vocab_size, 4);
  GenerateConfig g;
  g.max_new_tokens = 20;
  g.sampling.temperature = 0;
  std::vector<int32_t> greedy = generate(m.model, prompt, g);
  g.sampling.temperature = 0.9f;
  g.sampling.top_k = 1;
  g.seed = 77;
  EXPECT_EQ(generate(m.model, prompt, g), greedy);
  g.sampling.top_k = 0;
  g.sampling.top_p = 1e-6f;  // only the most likely token survives
  EXPECT_EQ(generate(m.model, prompt, g), greedy);

  g.sampling = {1.0f, 0, 1.0f};
  std::vector<int32_t> a = generate(m.model, prompt, g), b = generate(m.model, prompt, g);
  EXPECT_EQ(a, b);
  g.seed = 78;
  EXPECT_NE(generate(m.model, prompt, g), a);

  // Streaming: the callback sees every token, in order, and can stop early.
  std::vector<int32_t> seen;
  std::vector<int32_t> out = generate(m.model, prompt, g, [&](int32_t t) {
    seen.push_back(t);
    return seen.size() < 5;
  });
  EXPECT_EQ(seen, out);
  EXPECT_EQ(out.size(), 5u);
  // A stop token ends generation after it is produced.
  g.stop_token = out[2];
  std::vector<int32_t> stopped = generate(m.model, prompt, g);
  EXPECT_LE(stopped.size(), 3u);
  EXPECT_EQ(stopped.back(), out[2]);
}

TEST(Sample, FrequenciesFollowTemperatureTopKAndTopP) {
  const float logits[5] = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f};
  auto freqs = [&](SamplingConfig c) {
    Rng rng{123, 0, 0};
    std::vector<double> f(5, 0.0);
    const int n = 200000;
    for (int i = 0; i < n; ++i) f[size_t(sample_token(logits, 5, c, rng))] += 1.0 / n;
    return f;
  };
  auto softmax = [&](float t, int k) {
    std::vector<double> p(5, 0.0);
    double s = 0;
    for (int i = 0; i < k; ++i) s += p[size_t(i)] = std::exp(logits[i] / t);
    for (double& x : p) x /= s;
    return p;
  };
  auto near = [](const std::vector<double>& a, const std::vector<double>& b) {
    for (size_t i = 0; i < a.size(); ++i)
      if (std::fabs(a[i] - b[i]) > 0.005) return false;
    return true;
  };
  EXPECT_TRUE(near(freqs({1.0f, 0, 1.0f}), softmax(1.0f, 5)));
  EXPECT_TRUE(near(freqs({0.5f, 0, 1.0f}), softmax(0.5f, 5)));
  EXPECT_TRUE(near(freqs({1.0f, 2, 1.0f}), softmax(1.0f, 2)));
  // p(0) = 0.53, p(0)+p(1) = 0.73 at T = 1: top-p 0.7 keeps two tokens.
  EXPECT_TRUE(near(freqs({1.0f, 0, 0.7f}), softmax(1.0f, 2)));
  EXPECT_EQ(argmax_token(logits, 5), 0);
}

}  // namespace
}  // namespace tessera

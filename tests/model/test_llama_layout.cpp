// ParamLayout for the Llama family (issue 17): which parameters exist, their
// shapes, the unequal [q | k | v] split of GQA and the [gate | up] split of
// SwiGLU over tensor-parallel ranks, and the parameter count by hand.
#include <gtest/gtest.h>

#include <vector>

#include "tessera/config/config_json.h"
#include "tessera/ckpt/slice_map.h"
#include "tessera/model/param_layout.h"
#include "tiny_model.h"

namespace tessera {
namespace {

// Llama-3-8B's published shape: 32 layers, hidden 4096, 32 heads over 8
// kv groups, SwiGLU width 14336, vocabulary 128256, untied, no biases.
GPTConfig llama3_8b() {
  GPTConfig m;
  m.num_layers = 32;
  m.hidden_size = 4096;
  m.num_heads = 32;
  m.num_query_groups = 8;
  m.ffn_hidden_size = 14336;
  m.seq_length = 8192;
  m.vocab_size = 128256;
  m.normalization = Normalization::RMSNorm;
  m.swiglu = true;
  m.position_embedding = PositionEmbedding::Rope;
  m.rotary_base = 500000.0f;
  m.untie_embeddings = true;
  m.add_bias_linear = false;
  return m;
}

TEST(LlamaLayout, Llama3_8bHasItsPublishedParameterCount) {
  // 8,030,261,248 as Hugging Face counts Meta-Llama-3-8B.
  EXPECT_EQ(ParamLayout::count_model_params(llama3_8b()), 8030261248);
}

TEST(LlamaLayout, NamesAndShapesOfTheFamily) {
  const GPTConfig m = test::tiny_llama();  // C 32, NH 4, KVH 2, hs 8, F 64
  ParamLayout L = ParamLayout::build(m, ParallelConfig{}, 0, 0);
  std::vector<std::string> names;
  for (const ParamEntry& e : L.entries()) names.push_back(e.name);
  const std::vector<std::string> want = {
      "wte",
      "h.0.ln_1.weight", "h.0.attn.qkv.weight", "h.0.attn.proj.weight", "h.0.ln_2.weight",
      "h.0.mlp.fc.weight", "h.0.mlp.proj.weight",
      "h.1.ln_1.weight", "h.1.attn.qkv.weight", "h.1.attn.proj.weight", "h.1.ln_2.weight",
      "h.1.mlp.fc.weight", "h.1.mlp.proj.weight",
      "ln_f.weight", "lm_head.weight"};
  EXPECT_EQ(names, want);
  EXPECT_EQ(L.find("h.0.attn.qkv.weight").global_shape, Shape({(4 + 2 * 2) * 8, 32}));
  EXPECT_EQ(L.find("h.0.attn.proj.weight").global_shape, Shape({32, 32}));
  EXPECT_EQ(L.find("h.0.mlp.fc.weight").global_shape, Shape({2 * 64, 32}));
  EXPECT_EQ(L.find("h.0.mlp.proj.weight").global_shape, Shape({32, 64}));
  EXPECT_EQ(L.find("lm_head.weight").global_shape, Shape({128, 32}));
  EXPECT_TRUE(L.find("lm_head.weight").weight_decay);
  // By hand: tables V*C twice (untied), per layer qkv 64*32 + proj 32*32 +
  // fc 128*32 + proj 32*64 + 2 gains, the final gain.
  const int64_t layer = 64 * 32 + 32 * 32 + 128 * 32 + 32 * 64 + 2 * 32;
  EXPECT_EQ(ParamLayout::count_model_params(m), 2 * 67 * 32 + 2 * layer + 32);
}

TEST(LlamaLayout, LastStageHoldsLmHeadAndNoTokenTableWhenUntied) {
  GPTConfig m = test::tiny_llama();
  ParallelConfig par;
  par.pp = 2;
  ParamLayout first = ParamLayout::build(m, par, 0, 0), last = ParamLayout::build(m, par, 0, 1);
  EXPECT_TRUE(first.contains("wte"));
  EXPECT_FALSE(first.contains("lm_head.weight"));
  EXPECT_FALSE(last.contains("wte"));  // no tied copy to keep in step
  EXPECT_TRUE(last.contains("lm_head.weight"));
  m.untie_embeddings = false;
  EXPECT_TRUE(ParamLayout::build(m, par, 0, 1).contains("wte"));  // the tied copy
}

// Every element of the global tensor is held by exactly one tp rank, and
// each rank's rows are its q heads, then its k heads, then its v heads (and
// gate then up for SwiGLU's fc), as the kernels expect.
TEST(LlamaLayout, UnequalQkvAndGateUpSplitsCoverEachElementOnce) {
  GPTConfig m = test::tiny_llama();
  m.hidden_size = 64;
  m.num_heads = 8;
  m.num_query_groups = 4;  // hs 8: q 64 rows, k 32, v 32
  for (int64_t tp : {2, 4}) {
    ParallelConfig par;
    par.tp = tp;
    for (const char* name : {"h.0.attn.qkv.weight", "h.0.mlp.fc.weight"}) {
      const ParamLayout whole = ParamLayout::build(m, ParallelConfig{}, 0, 0);
      const ParamEntry& g = whole.find(name);
      std::vector<int> held(size_t(g.global_shape.numel()), 0);
      for (int64_t r = 0; r < tp; ++r) {
        ParamLayout L = ParamLayout::build(m, par, r, 0);
        const ParamEntry& e = L.find(name);
        const int64_t cols = e.local_shape[1];
        for (int64_t i = 0; i < e.numel(); ++i) ++held[size_t(L.global_index(e, i))];
        // The local row order: part by part, this rank's rows of each.
        int64_t local_row = 0;
        for (int64_t j = 0; j < e.part_count(); ++j)
          for (int64_t k = 0; k < e.part_rows(j) / tp; ++k, ++local_row)
            ASSERT_EQ(L.global_index(e, local_row * cols) / cols,
                      e.part_begin(j) + r * (e.part_rows(j) / tp) + k)
                << name << " tp " << tp << " rank " << r << " row " << local_row;
        // The checkpoint's slice map agrees element by element.
        ckpt::SliceMap s = ckpt::slice_of(L, e);
        ASSERT_EQ(s.numel(), e.numel());
        s.for_each_run(0, e.numel(), [&](int64_t l, int64_t gi, int64_t n) {
          for (int64_t i = 0; i < n; ++i) ASSERT_EQ(gi + i, L.global_index(e, l + i)) << name;
        });
      }
      for (size_t i = 0; i < held.size(); ++i) ASSERT_EQ(held[i], 1) << name << " element " << i;
    }
  }
  // The parts themselves: q, k, v of 64, 32, 32 rows; gate and up of F.
  const ParamLayout one = ParamLayout::build(m, ParallelConfig{}, 0, 0);
  EXPECT_EQ(one.find("h.0.attn.qkv.weight").split_parts, (std::vector<int64_t>{64, 32, 32}));
  EXPECT_EQ(one.find("h.0.mlp.fc.weight").split_parts, (std::vector<int64_t>{m.ffn(), m.ffn()}));
}

TEST(LlamaLayout, GptKeepsItsEqualQkvSplit) {
  const GPTConfig m = test::tiny_gpt();  // C 32
  ParallelConfig par;
  par.tp = 2;
  ParamLayout L = ParamLayout::build(m, par, 1, 0);
  const ParamEntry& e = L.find("h.0.attn.qkv.weight");
  EXPECT_EQ(e.split_parts, (std::vector<int64_t>{32, 32, 32}));
  EXPECT_EQ(L.find("h.0.mlp.fc.weight").part_count(), 1);
  // tp rank 1's local row 16 is the first row of its k slice: global row 32 + 16.
  EXPECT_EQ(L.global_index(e, 16 * 32) / 32, 48);
}

TEST(LlamaLayout, ConfigJsonRoundTripsTheFamilyAndLeavesGptAsItWas) {
  GPTConfig m = test::tiny_llama();
  m.rotary_base = 500000.0f;
  m.norm_epsilon = 1e-6f;
  const GPTConfig back = model_from_json(model_to_json(m));
  EXPECT_EQ(model_difference(m, back), "");
  EXPECT_EQ(back.summary(), m.summary());
  EXPECT_EQ(back.ffn(), m.ffn());
  // A GPT's metadata has none of the family's keys.
  const auto j = model_to_json(test::tiny_gpt());
  for (const char* k : {"normalization", "swiglu", "position_embedding_type", "num_query_groups",
                        "untie_embeddings_and_output_weights", "add_bias_linear", "norm_epsilon"})
    EXPECT_FALSE(j.contains(k)) << k;
  // Each switch is a difference of its own.
  GPTConfig r = m;
  r.rotary_base = 10000.0f;
  EXPECT_EQ(model_difference(m, r), "rotary_base 500000 vs 10000");
  GPTConfig g = m;
  g.num_query_groups = 4;
  EXPECT_EQ(model_difference(m, g), "num_query_groups 2 vs 4");
  EXPECT_EQ(model_difference(test::tiny_gpt(), [] {
              GPTConfig x = test::tiny_gpt();
              x.normalization = Normalization::RMSNorm;
              return x;
            }()),
            "normalization LayerNorm vs RMSNorm");
  // --add-qkv-bias (Qwen2's block): stored, read back, and a difference
  // (a checkpoint with q, k, v biases does not load into a model without).
  GPTConfig q = m;
  q.add_qkv_bias = true;
  const GPTConfig q_back = model_from_json(model_to_json(q));
  EXPECT_TRUE(q_back.add_qkv_bias);
  EXPECT_EQ(model_difference(q, q_back), "");
  EXPECT_EQ(model_difference(q, m), "qkv bias true vs false");
  EXPECT_FALSE(model_to_json(m).contains("add_qkv_bias"));  // not written at its default
  // With every GEMM biased, the flag changes nothing: no difference.
  GPTConfig biased = m, biased_q = m;
  biased.add_bias_linear = biased_q.add_bias_linear = true;
  biased_q.add_qkv_bias = true;
  EXPECT_EQ(model_difference(biased, biased_q), "");
}

}  // namespace
}  // namespace tessera

// ParamLayout: counts, offsets and tensor-parallel slices.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tessera/model/param_layout.h"
#include "tiny_model.h"

namespace tessera {
namespace {

GPTConfig gpt2_124m() { return test::gpt2_small(); }

TEST(ParamLayout, Gpt2SmallHasItsPublishedParameterCount) {
  // GPT-2 124M as Hugging Face counts it (tied head, 1024 positions).
  EXPECT_EQ(ParamLayout::count_model_params(gpt2_124m()), 124439808);
}

// An MoE layer (docs/moe.md) holds a router (E, C) and E experts of the
// dense MLP's shapes stacked on a leading dim, in place of the MLP; with
// --moe-layer-freq 2 the odd layers keep their dense MLP.
TEST(ParamLayout, MoeLayersHoldARouterAndStackedExperts) {
  GPTConfig m = gpt2_124m();
  const int64_t C = m.hidden_size, F = m.ffn();
  const int64_t dense = ParamLayout::count_model_params(m);
  m.num_experts = 8;
  m.moe_layer_freq = 2;
  const ParamLayout L = ParamLayout::build(m, ParallelConfig{}, 0, 0);
  EXPECT_EQ(L.find("h.0.mlp.router.weight").global_shape, Shape({8, C}));
  EXPECT_EQ(L.find("h.0.mlp.experts.fc.weight").global_shape, Shape({8, F, C}));
  EXPECT_EQ(L.find("h.0.mlp.experts.fc.bias").global_shape, Shape({8, F}));
  EXPECT_EQ(L.find("h.0.mlp.experts.proj.weight").global_shape, Shape({8, C, F}));
  EXPECT_EQ(L.find("h.0.mlp.experts.proj.bias").global_shape, Shape({8, C}));
  EXPECT_FALSE(L.contains("h.0.mlp.fc.weight"));
  EXPECT_TRUE(L.contains("h.1.mlp.fc.weight"));
  EXPECT_FALSE(L.contains("h.1.mlp.router.weight"));
  // Six MoE layers of 12, each 7 more MLPs and a router than the dense one.
  const int64_t mlp = 2 * C * F + F + C;
  EXPECT_EQ(ParamLayout::count_model_params(m), dense + 6 * (7 * mlp + 8 * C));
}

TEST(ParamLayout, OneRankBufferIsContiguousWithinUnitsAndUnitsAligned) {
  GPTConfig m = gpt2_124m();
  ParamLayout L = ParamLayout::build(m, ParallelConfig{}, 0, 0);
  EXPECT_EQ(L.padded_vocab(), 50304);  // multiple of 128
  ASSERT_EQ(int64_t(L.units().size()), 1 + 12 + 1);  // embeddings, layers, final norm
  int64_t expect_offset = 0;
  size_t u = 0;
  for (const ParamEntry& e : L.entries()) {
    if (expect_offset == L.units()[u].end) expect_offset = L.units()[++u].begin;
    EXPECT_EQ(e.offset, expect_offset) << e.name;
    EXPECT_EQ(e.layer, L.units()[u].layer) << e.name;
    expect_offset += e.numel();
    EXPECT_EQ(e.global_shape, e.local_shape) << e.name;
  }
  for (size_t i = 0; i < L.units().size(); ++i) {
    EXPECT_EQ(L.units()[i].begin, i ? L.units()[i - 1].end : 0);
    EXPECT_EQ(L.units()[i].numel() % 16, 0);
  }
  EXPECT_EQ(L.numel(), L.units().back().end);
  EXPECT_EQ(L.param_count(), 124439808 + (50304 - 50257) * 768);
  EXPECT_EQ(int64_t(L.entries().size()), 2 + 12 * 12 + 2);
}

TEST(ParamLayout, UnitsDivideByTheDataParallelSize) {
  GPTConfig m = gpt2_124m();
  for (int64_t dp : {2, 3, 4, 8}) {
    ParallelConfig par;
    par.dp = dp;
    ParamLayout L = ParamLayout::build(m, par, 0, 0);
    for (const ParamUnit& u : L.units()) EXPECT_EQ(u.numel() % (16 * dp), 0);
    EXPECT_EQ(L.param_count(), ParamLayout::build(m, ParallelConfig{}, 0, 0).param_count());
  }
}

TEST(ParamLayout, LayersAreContiguousRanges) {
  ParamLayout L = ParamLayout::build(gpt2_124m(), ParallelConfig{}, 0, 0);
  int64_t last_layer = -1;
  for (const ParamEntry& e : L.entries())
    if (e.layer >= 0) {
      EXPECT_GE(e.layer, last_layer);
      last_layer = e.layer;
    }
  EXPECT_EQ(last_layer, 11);
}

TEST(ParamLayout, WeightDecayOnlyOnMatricesAndEmbeddings) {
  ParamLayout L = ParamLayout::build(gpt2_124m(), ParallelConfig{}, 0, 0);
  for (const ParamEntry& e : L.entries())
    EXPECT_EQ(e.weight_decay, e.global_shape.ndim == 2) << e.name;
}

TEST(ParamLayout, TensorParallelSlicesCoverEveryGlobalElementOnce) {
  GPTConfig gpt;
  gpt.num_layers = 2;
  gpt.hidden_size = 16;
  gpt.num_heads = 4;
  gpt.seq_length = 8;
  gpt.vocab_size = 300;
  gpt.make_vocab_size_divisible_by = 8;
  // The same of an MoE model: every expert's fc ([gate | up] under SwiGLU)
  // and proj split over tp, biases and a gated shared expert beside them.
  GPTConfig moe = gpt;
  moe.swiglu = true;
  moe.ffn_hidden_size = 32;
  moe.num_experts = 3;
  moe.moe_layer_freq = 2;
  moe.moe_shared_expert_intermediate_size = 16;
  moe.moe_shared_expert_gate = true;
  for (const GPTConfig& m : {gpt, moe})
  for (int64_t tp : {2, 4}) {
    ParallelConfig par;
    par.tp = tp;
    ParamLayout one = ParamLayout::build(m, ParallelConfig{}, 0, 0);
    // Padding rounds to 8 * tp, so the table grows with tp (as Megatron's does).
    EXPECT_EQ(m.padded_vocab(tp) % (8 * tp), 0);
    for (const ParamEntry& g : one.entries()) {
      if (g.name == "wte") continue;  // padded differently per tp
      std::set<int64_t> seen;
      int64_t total = 0;
      for (int64_t r = 0; r < tp; ++r) {
        ParamLayout L = ParamLayout::build(m, par, r, 0);
        const ParamEntry& e = L.find(g.name);
        for (int64_t i = 0; i < e.numel(); ++i) {
          int64_t gi = L.global_index(e, i);
          ASSERT_GE(gi, 0);
          ASSERT_LT(gi, g.numel()) << g.name;
          if (e.split != TpSplit::None) EXPECT_TRUE(seen.insert(gi).second) << g.name;
        }
        total += e.numel();
      }
      if (g.split != TpSplit::None) EXPECT_EQ(int64_t(seen.size()), g.numel()) << g.name;
      else EXPECT_EQ(total, tp * g.numel()) << g.name;  // replicated
    }
  }
}

// Expert parallelism (docs/moe.md): each ep rank holds E / ep experts of
// every stack, (E / ep, ...) at expert_begin; over the ep x tp ranks every
// global element of a stack is held once, each rank's stacks in an expert
// unit of their own after the layer's dense unit, a multiple of 16 x dp.
TEST(ParamLayout, ExpertStacksSplitOverExpertParallelRanksCoverEveryElementOnce) {
  GPTConfig m;
  m.num_layers = 2;
  m.hidden_size = 16;
  m.num_heads = 4;
  m.seq_length = 8;
  m.vocab_size = 300;
  m.swiglu = true;
  m.ffn_hidden_size = 32;
  m.num_experts = 4;
  m.moe_shared_expert_intermediate_size = 16;
  const ParamLayout one = ParamLayout::build(m, ParallelConfig{}, 0, 0);
  for (int64_t ep : {2, 4})
  for (int64_t tp : {1, 2}) {
    ParallelConfig par;
    par.tp = tp;
    par.dp = 4;
    par.ep = ep;
    std::map<std::string, std::set<int64_t>> seen;
    for (int64_t e_rank = 0; e_rank < ep; ++e_rank)
    for (int64_t t_rank = 0; t_rank < tp; ++t_rank) {
      const ParamLayout L = ParamLayout::build(m, par, t_rank, 0, e_rank);
      EXPECT_EQ(L.ep(), ep);
      // Per layer: the dense unit, then the expert unit; sizes 16 x dp.
      ASSERT_EQ(L.units().size(), size_t(1 + 2 * 2 + 1));
      for (size_t u = 0; u < L.units().size(); ++u) {
        EXPECT_EQ(L.units()[u].numel() % (16 * 4), 0);
        EXPECT_EQ(L.units()[u].expert, u == 2 || u == 4);
      }
      int64_t experts = 0;
      for (const ParamEntry& e : L.entries()) {
        const bool stack = e.name.find(".experts.") != std::string::npos;
        EXPECT_EQ(e.ep_split, stack) << e.name;
        const ParamUnit* in = nullptr;
        for (const ParamUnit& u : L.units())
          if (e.offset >= u.begin && e.offset < u.end) in = &u;
        ASSERT_TRUE(in);
        EXPECT_EQ(in->expert, stack) << e.name;
        if (!stack) continue;
        experts += e.numel();
        EXPECT_EQ(e.local_shape[0], 4 / ep) << e.name;
        EXPECT_EQ(e.expert_begin, e_rank * (4 / ep)) << e.name;
        EXPECT_EQ(e.numel() * ep * (e.split == TpSplit::None ? 1 : tp),
                  e.global_shape.numel()) << e.name;
        for (int64_t i = 0; i < e.numel(); ++i) {
          const int64_t g = L.global_index(e, i);
          ASSERT_LT(g, e.global_shape.numel());
          // Within this rank's experts, and held once (tp-replicated biases
          // once per tp rank).
          EXPECT_EQ(g / (e.global_shape.numel() / 4) / (4 / ep), e_rank) << e.name;
          if (e.split != TpSplit::None || t_rank == 0) EXPECT_TRUE(seen[e.name].insert(g).second);
        }
      }
      EXPECT_LE(experts, L.expert_numel());
    }
    for (const auto& [name, s] : seen)
      EXPECT_EQ(int64_t(s.size()), one.find(name).numel()) << name;
  }
}

TEST(ParamLayout, QkvSliceHoldsTheRanksHeadsOfQKAndV) {
  GPTConfig m;
  m.num_layers = 1;
  m.hidden_size = 8;
  m.num_heads = 4;
  m.vocab_size = 16;
  ParallelConfig par;
  par.tp = 2;
  ParamLayout L = ParamLayout::build(m, par, 1, 0);
  const ParamEntry& e = L.find("h.0.attn.qkv.bias");
  ASSERT_EQ(e.numel(), 12);
  // Rank 1 holds q[4:8], k[4:8], v[4:8] of the (3*8) bias.
  std::vector<int64_t> got;
  for (int64_t i = 0; i < e.numel(); ++i) got.push_back(L.global_index(e, i));
  EXPECT_EQ(got, (std::vector<int64_t>{4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23}));
}

TEST(ParamLayout, PipelineStagesSplitLayersAndPlaceEmbeddingAndHead) {
  GPTConfig m = gpt2_124m();
  ParallelConfig par;
  par.pp = 4;
  int64_t total = 0;
  for (int64_t s = 0; s < 4; ++s) {
    ParamLayout L = ParamLayout::build(m, par, 0, s);
    EXPECT_EQ(L.layers(), (std::vector<int64_t>{3 * s, 3 * s + 1, 3 * s + 2}));
    EXPECT_EQ(L.has_embedding(), s == 0);
    EXPECT_EQ(L.has_head(), s == 3);
    EXPECT_EQ(L.contains("wte"), s == 0 || s == 3);  // the tied head needs the table too
    total += L.param_count();
  }
  ParamLayout one = ParamLayout::build(m, ParallelConfig{}, 0, 0);
  EXPECT_EQ(total, one.param_count() + one.find("wte").numel());
}

TEST(ParamLayout, InterleavedStagesHoldNonContiguousChunks) {
  GPTConfig m = gpt2_124m();
  ParallelConfig par;
  par.pp = 2;
  par.virtual_stages = 3;  // 6 chunks of 2 layers
  EXPECT_EQ(stage_layers(m, par, 0), (std::vector<int64_t>{0, 1, 4, 5, 8, 9}));
  EXPECT_EQ(stage_layers(m, par, 1), (std::vector<int64_t>{2, 3, 6, 7, 10, 11}));
}

}  // namespace
}  // namespace tessera

// Uneven pipeline stages (issue 13 §3; Megatron-Core's
// --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers):
// which layers each stage holds, with and without virtual stages; that the
// schedule's chunk numbering still agrees with the layers; that every layer
// and every parameter is held exactly once; the checkpoint metadata keeps
// the split; and every impossible split is refused naming its flag.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "expect_error.h"
#include "tessera/config/config_json.h"
#include "tessera/model/param_layout.h"
#include "tessera/parallel/schedule.h"
#include "tessera/parallel/schedule_sim.h"

namespace tessera {
namespace {

using test::throws_error_with;
using Layers = std::vector<int64_t>;

GPTConfig layers_model(int64_t L) {
  GPTConfig m;
  m.num_layers = L;
  m.hidden_size = 32;
  m.num_heads = 2;
  m.seq_length = 16;
  m.vocab_size = 64;
  return m;
}

ParallelConfig split(int64_t pp, std::optional<int64_t> first, std::optional<int64_t> last,
                     int64_t v = 1) {
  ParallelConfig p;
  p.pp = pp;
  p.virtual_stages = v;
  if (v > 1) p.schedule = ScheduleKind::Interleaved;
  p.first_stage_layers = first;
  p.last_stage_layers = last;
  p.micro_batch = 1;
  p.global_batch = 4 * pp;
  return p;
}

TEST(UnevenStages, FirstStageSmallerPp2) {
  const GPTConfig m = layers_model(3);
  const ParallelConfig p = split(2, 1, std::nullopt);
  EXPECT_NO_THROW(p.validate(m, 2));
  EXPECT_EQ(stage_layers(m, p, 0), (Layers{0}));
  EXPECT_EQ(stage_layers(m, p, 1), (Layers{1, 2}));
  EXPECT_EQ(p.stage_split_str(m.num_layers), "1 | 2");
}

TEST(UnevenStages, FirstAndLastSmallerPp4) {
  const GPTConfig m = layers_model(8);
  const ParallelConfig p = split(4, 1, 1);  // the middle two split 6: 3 each
  EXPECT_NO_THROW(p.validate(m, 4));
  EXPECT_EQ(stage_layers(m, p, 0), (Layers{0}));
  EXPECT_EQ(stage_layers(m, p, 1), (Layers{1, 2, 3}));
  EXPECT_EQ(stage_layers(m, p, 2), (Layers{4, 5, 6}));
  EXPECT_EQ(stage_layers(m, p, 3), (Layers{7}));
  // Only the last given: the first three stages share the rest.
  const ParallelConfig q = split(4, std::nullopt, 2);
  EXPECT_NO_THROW(q.validate(m, 4));
  EXPECT_EQ(q.stage_split_str(m.num_layers), "2 | 2 | 2 | 2");
  const ParallelConfig r = split(4, std::nullopt, 5);
  EXPECT_NO_THROW(r.validate(m, 4));
  EXPECT_EQ(r.stage_split_str(m.num_layers), "1 | 1 | 1 | 5");
}

TEST(UnevenStages, EvenSplitUnchanged) {
  // Unset flags: the uniform split, exactly as before.
  const GPTConfig m = layers_model(12);
  ParallelConfig p = split(4, std::nullopt, std::nullopt);
  for (int64_t s = 0; s < 4; ++s)
    EXPECT_EQ(stage_layers(m, p, s), (Layers{3 * s, 3 * s + 1, 3 * s + 2}));
  // Flags equal to the even share: the same assignment.
  ParallelConfig q = split(4, 3, 3);
  for (int64_t s = 0; s < 4; ++s) EXPECT_EQ(stage_layers(m, q, s), stage_layers(m, p, s));
}

TEST(UnevenStages, InterleavedChunksFollowTheSplitInEveryRound) {
  // 12 layers, pp 3, v 2, first 2, last 4: middle 6; chunks per round:
  // rank 0 one layer, rank 1 three, rank 2 two. Round j holds 6 layers.
  const GPTConfig m = layers_model(12);
  const ParallelConfig p = split(3, 2, 4, 2);
  EXPECT_NO_THROW(p.validate(m, 3));
  EXPECT_EQ(stage_layers(m, p, 0), (Layers{0, 6}));
  EXPECT_EQ(stage_layers(m, p, 1), (Layers{1, 2, 3, 7, 8, 9}));
  EXPECT_EQ(stage_layers(m, p, 2), (Layers{4, 5, 10, 11}));
}

TEST(UnevenStages, ChunkNumberingMatchesStageLayers) {
  // Global chunk g = j p + r starts where chunk g - 1 ends, on every layout.
  const GPTConfig m = layers_model(20);
  for (const ParallelConfig& p : {split(4, 2, 2, 2), split(4, 8, std::nullopt, 2),
                                  split(2, 4, 16, 4), split(5, 4, 4, 1)}) {
    ASSERT_NO_THROW(p.validate(m, p.pp)) << p.summary();
    Layers all;
    for (int64_t r = 0; r < p.pp; ++r) {
      const Layers layers = stage_layers(m, p, r);
      const int64_t per_chunk = p.chunk_layer_count(m.num_layers, r);
      ASSERT_EQ(int64_t(layers.size()), per_chunk * p.virtual_stages);
      for (int64_t j = 0; j < p.virtual_stages; ++j) {
        const int64_t g = global_chunk(p.pp, r, j);
        EXPECT_EQ(layers[size_t(j * per_chunk)], p.chunk_first_layer(m.num_layers, g));
        // Consecutive: the chunk ends where the next global chunk begins.
        EXPECT_EQ(layers[size_t(j * per_chunk + per_chunk - 1)] + 1,
                  p.chunk_first_layer(m.num_layers, g + 1))
            << p.summary() << " rank " << r << " chunk " << j;
      }
      all.insert(all.end(), layers.begin(), layers.end());
    }
    std::sort(all.begin(), all.end());
    Layers want(size_t(m.num_layers));
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(all, want) << p.summary();
    EXPECT_EQ(p.chunk_first_layer(m.num_layers, p.pp * p.virtual_stages), m.num_layers);
  }
}

// Why the split exists (issue 13 §3): the last stage also runs the LM head
// and loss. With a head that costs two layers, 6 layers on pp 2 evenly give
// stages of 3 | 3 + 2 and a bubble above (p - 1) / m; 4 | 2 + 2 balances
// them and the simulated bubble is exactly (p - 1) / m, for 1F1B and GPipe.
TEST(UnevenStages, BalancedSplitBringsTheBubbleToTheory) {
  const GPTConfig m = layers_model(6);
  const int64_t micro = 8;
  auto bubble = [&](ScheduleKind kind, std::optional<int64_t> first) {
    ParallelConfig p = split(2, first, std::nullopt);
    p.schedule = kind;
    ScheduleCosts c;
    for (int64_t g = 0; g < p.pp; ++g) {  // v = 1: global chunk g is stage g
      const double layers = double(p.chunk_layer_count(m.num_layers, g));
      const double head = g == p.pp - 1 ? 2.0 : 0.0;
      c.forward_by_chunk.push_back(layers + head);
      c.backward_by_chunk.push_back(2.0 * (layers + head));
    }
    return simulate_schedule(build_pipeline(kind, p.pp, 1, micro), c, false).bubble_fraction;
  };
  for (ScheduleKind kind : {ScheduleKind::OneFOneB, ScheduleKind::GPipe}) {
    EXPECT_NEAR(bubble(kind, 4), 1.0 / double(micro), 1e-12) << schedule_kind_name(kind);
    EXPECT_GT(bubble(kind, std::nullopt), 1.0 / double(micro) + 0.1) << schedule_kind_name(kind);
  }
}

TEST(UnevenStages, EveryParameterHeldOnce) {
  const GPTConfig m = layers_model(7);
  const ParallelConfig p = split(3, 1, 2);  // 1 | 4 | 2
  ASSERT_NO_THROW(p.validate(m, 3));
  int64_t total = 0;
  for (int64_t s = 0; s < 3; ++s) {
    const ParamLayout L = ParamLayout::build(m, p, 0, s);
    EXPECT_EQ(int64_t(L.layers().size()), p.stage_layer_count(m.num_layers, s));
    EXPECT_EQ(L.has_embedding(), s == 0);
    EXPECT_EQ(L.has_head(), s == 2);
    total += L.param_count();
  }
  const ParamLayout one = ParamLayout::build(m, ParallelConfig{}, 0, 0);
  // The last stage's copy of the tied token table is the only extra.
  EXPECT_EQ(total, one.param_count() + one.find("wte").numel());
}

// zbv's V (config/chunk_placement.h): rank r holds global chunks r and
// 2 pp - 1 - r, so rank 0 holds the first layers and the last, the
// embedding and the head (one token table: no tied copy anywhere), and the
// chunks still follow one another in model order, evenly or with the first
// stage's split.
ParallelConfig zbv(int64_t pp, std::optional<int64_t> first = std::nullopt) {
  ParallelConfig p = split(pp, first, std::nullopt, 2);
  p.schedule = ScheduleKind::ZeroBubbleV;
  return p;
}

TEST(ZbvLayout, RanksHoldTheVsTwoChunks) {
  EXPECT_EQ(stage_layers(layers_model(4), zbv(2), 0), (Layers{0, 3}));
  EXPECT_EQ(stage_layers(layers_model(4), zbv(2), 1), (Layers{1, 2}));
  const GPTConfig m8 = layers_model(8);
  for (int64_t r = 0; r < 4; ++r) EXPECT_EQ(stage_layers(m8, zbv(4), r), (Layers{r, 7 - r}));
  // Two layers a chunk on rank 0 and two on rank 1: 0-1 | 2-3, 4-5 | 6-7.
  EXPECT_EQ(stage_layers(m8, zbv(2), 0), (Layers{0, 1, 6, 7}));
  EXPECT_EQ(zbv(2).stage_layers_str(8, 0), "0-1, 6-7");
  // --decoder-first-pipeline-num-layers 2 of 6: rank 0 one layer a chunk.
  const GPTConfig m6 = layers_model(6);
  ASSERT_NO_THROW(zbv(2, 2).validate(m6, 2));
  EXPECT_EQ(stage_layers(m6, zbv(2, 2), 0), (Layers{0, 5}));
  EXPECT_EQ(stage_layers(m6, zbv(2, 2), 1), (Layers{1, 2, 3, 4}));
}

TEST(ZbvLayout, ChunksFollowInModelOrderAndEveryParameterIsHeldOnce) {
  const GPTConfig m = layers_model(12);
  for (const ParallelConfig& p : {zbv(2), zbv(3), zbv(2, 4), zbv(3, 8)}) {
    ASSERT_NO_THROW(p.validate(m, p.pp)) << p.summary();
    const ChunkPlacement V = p.placement();
    ASSERT_EQ(V, ChunkPlacement::V);
    int64_t total = 0;
    for (int64_t r = 0; r < p.pp; ++r) {
      const Layers layers = stage_layers(m, p, r);
      const int64_t per_chunk = p.chunk_layer_count(m.num_layers, r);
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t g = global_chunk(p.pp, r, j, V);
        EXPECT_EQ(chunk_rank(p.pp, g, V), r);
        EXPECT_EQ(chunk_local(p.pp, g, V), j);
        EXPECT_EQ(layers[size_t(j * per_chunk)], p.chunk_first_layer(m.num_layers, g));
        EXPECT_EQ(layers[size_t(j * per_chunk + per_chunk - 1)] + 1,
                  p.chunk_first_layer(m.num_layers, g + 1))
            << p.summary() << " rank " << r << " chunk " << j;
      }
      const ParamLayout L = ParamLayout::build(m, p, 0, r);
      EXPECT_EQ(L.layers(), layers);
      EXPECT_EQ(L.has_embedding(), r == 0);
      EXPECT_EQ(L.has_head(), r == 0);
      EXPECT_EQ(L.contains("wte"), r == 0);
      total += L.param_count();
    }
    EXPECT_EQ(p.chunk_first_layer(m.num_layers, 2 * p.pp), m.num_layers);
    // No tied copy: exactly the one-process model.
    EXPECT_EQ(total, ParamLayout::build(m, ParallelConfig{}, 0, 0).param_count()) << p.summary();
  }
}

TEST(UnevenStages, CheckpointMetadataKeepsTheSplit) {
  const ParallelConfig p = split(4, 1, 3);
  const ParallelConfig back = parallel_from_json(parallel_to_json(p));
  EXPECT_EQ(back.first_stage_layers, std::optional<int64_t>(1));
  EXPECT_EQ(back.last_stage_layers, std::optional<int64_t>(3));
  // An even run's metadata has no such keys (files read as before).
  const auto even = parallel_to_json(split(4, std::nullopt, std::nullopt));
  EXPECT_FALSE(even.contains("first_stage_layers"));
  EXPECT_FALSE(even.contains("last_stage_layers"));
  EXPECT_FALSE(parallel_from_json(even).uneven_stages());
}

TEST(UnevenStages, ImpossibleSplitsNameTheFlag) {
  const char* first = "--decoder-first-pipeline-num-layers";
  const char* last = "--decoder-last-pipeline-num-layers";
  auto refused = [](const ParallelConfig& p, int64_t L, std::vector<std::string> parts) {
    const GPTConfig m = layers_model(L);
    return throws_error_with([&] { p.validate(m, p.pp); }, parts);
  };
  // The rest does not divide over the middle stages.
  EXPECT_TRUE(refused(split(4, 2, std::nullopt), 9, {first, "7 layers", "not divisible", "3"}));
  EXPECT_TRUE(refused(split(4, 1, 2), 8, {first, last, "5 layers", "not divisible"}));
  // first + last leave nothing for the middle stages.
  EXPECT_TRUE(refused(split(4, 4, 4), 8, {first, last, "at least one layer"}));
  EXPECT_TRUE(refused(split(3, 5, std::nullopt), 6, {first, "at least one layer"}));
  // pp 2 with both: they must add up to the model.
  EXPECT_TRUE(refused(split(2, 1, 1), 3, {first, last, "must equal --num-layers (3)"}));
  EXPECT_NO_THROW(split(2, 1, 2).validate(layers_model(3), 2));
  // More than the model, zero, negative.
  EXPECT_TRUE(refused(split(2, 4, std::nullopt), 3, {first, "(4) is more than --num-layers (3)"}));
  EXPECT_TRUE(refused(split(2, 0, std::nullopt), 3, {first, "must be >= 1 (got 0)"}));
  EXPECT_TRUE(refused(split(2, std::nullopt, -1), 3, {last, "must be >= 1 (got -1)"}));
  // Without a pipeline.
  EXPECT_TRUE(refused(split(1, 1, std::nullopt), 3, {first, "--pipeline-model-parallel-size > 1"}));
  EXPECT_TRUE(refused(split(1, std::nullopt, 1), 3, {last, "--pipeline-model-parallel-size > 1"}));
  // Virtual stages: every stage's count must divide by v.
  EXPECT_TRUE(refused(split(2, 3, std::nullopt, 2), 8, {first, "(3)", "--virtual-pipeline-stages (2)"}));
  EXPECT_TRUE(refused(split(4, 2, 2, 2), 9, {"5 layers", "not divisible by the 2 other"}));
  EXPECT_TRUE(refused(split(3, 2, 2, 2), 7,
                      {"3 layers of each middle pipeline stage", "--virtual-pipeline-stages (2)"}));
  // The uneven split replaces the even-split divisibility rule.
  EXPECT_NO_THROW(split(2, 1, std::nullopt).validate(layers_model(3), 2));
}

}  // namespace
}  // namespace tessera

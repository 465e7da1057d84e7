// Uneven pipeline stages in the planner (issue 13 §3): a layout with
// --decoder-first/last-pipeline-num-layers is priced stage by stage with
// each stage's own layer count (time, activations, parameters), and the
// search gives each pipeline layout the split that evens out its stages
// when the LM head makes the last one heavy.
#include <gtest/gtest.h>

#include <algorithm>

#include "tessera/plan/layout_cost.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/search.h"
#include "tessera/plan/system.h"

using namespace tessera;
using namespace tessera::plan;

namespace {

// A small model whose LM head (hidden x vocab) costs about `head_layers`
// transformer layers of GEMM work: a layer is 12 C^2 per token, the head V C.
GPTConfig model(int64_t layers, int64_t head_layers) {
  GPTConfig m;
  m.num_layers = layers;
  m.hidden_size = 256;
  m.num_heads = 4;
  m.seq_length = 128;
  m.vocab_size = head_layers * 12 * m.hidden_size;
  m.make_vocab_size_divisible_by = 128;
  return m;
}

PlanLayout pipeline(int64_t first, int64_t last, int64_t micro_batches = 8) {
  PlanLayout L;
  L.par.tp = 1;
  L.par.pp = 2;
  L.par.dp = 1;
  L.par.micro_batch = 2;
  L.par.global_batch = 2 * micro_batches;
  L.precision = Precision::Fp32;
  L.engine = true;
  if (first) L.par.first_stage_layers = first;
  if (last) L.par.last_stage_layers = last;
  return L;
}

// The search space of one pipeline layout of `pp` stages on pp devices.
SearchSpace pipeline_space(int64_t pp) {
  SearchSpace sp;
  sp.devices = pp;
  sp.global_batch = 16;
  sp.tp = {1};
  sp.pp = {pp};
  sp.micro_batch = {2};
  sp.zero_stages = {0};
  sp.recompute = {Recompute::None};
  sp.sequence_parallel = {false};
  sp.schedules = {ScheduleKind::OneFOneB};
  sp.precision = Precision::Fp32;
  sp.engine = true;
  return sp;
}

const StageCost& stage(const LayoutCost& c, int64_t s) {
  for (const StageCost& sc : c.stages)
    if (sc.stage == s) return sc;
  ADD_FAILURE() << "no stage " << s;
  return c.stages.front();
}

}  // namespace

TEST(PlanStageSplit, EachStageIsPricedWithItsOwnLayers) {
  const GPTConfig m = model(6, 1);
  const SystemSpec sys = load_system("local");
  const LayoutCost even = evaluate_layout(m, sys, pipeline(0, 0));
  const LayoutCost split = evaluate_layout(m, sys, pipeline(4, 0));  // 4 | 2
  // Stage 0 gains one layer's GEMMs (per micro-batch, forward and
  // backward), stage 1 loses exactly as much.
  const double gained = stage(split, 0).ops[Op::Gemm] - stage(even, 0).ops[Op::Gemm];
  const double lost = stage(even, 1).ops[Op::Gemm] - stage(split, 1).ops[Op::Gemm];
  EXPECT_GT(gained, 0.0);
  EXPECT_NEAR(gained, lost, 1e-12 * stage(even, 1).ops[Op::Gemm]);
  // ... which is a third of an even stage's layer GEMMs (3 layers each).
  const LayoutCost one_stage_less = evaluate_layout(m, sys, pipeline(0, 2));  // 4 | 2 again
  EXPECT_NEAR(stage(one_stage_less, 1).ops[Op::Gemm], stage(split, 1).ops[Op::Gemm],
              1e-12 * stage(split, 1).ops[Op::Gemm]);
  // Parameters and layer activations follow the layers: 4 layers against 3.
  EXPECT_GT(stage(split, 0).params, stage(even, 0).params);
  EXPECT_LT(stage(split, 1).params, stage(even, 1).params);
  EXPECT_NEAR(stage(split, 0).layer_activations / stage(even, 0).layer_activations, 4.0 / 3.0,
              1e-9);
  EXPECT_NEAR(stage(split, 1).layer_activations / stage(even, 1).layer_activations, 2.0 / 3.0,
              1e-9);
}

TEST(PlanStageSplit, HeavyHeadGetsALighterLastStage) {
  // The head costs about two layers: an even 4 | 4 leaves the last stage
  // with ~6 layers of work and the first with ~4; 5 | 3 evens them out.
  const GPTConfig m = model(8, 2);
  const SystemSpec sys = load_system("local");
  ParamCounter params(m);
  CostOptions screen;
  screen.simulate_schedule = false;
  const PlanLayout chosen = best_stage_split(m, sys, pipeline(0, 0), params, screen);
  ASSERT_TRUE(chosen.par.uneven_stages()) << chosen.str();
  EXPECT_LT(chosen.par.stage_layer_count(m.num_layers, 1), 4) << chosen.str();
  const LayoutCost even = evaluate_layout(m, sys, pipeline(0, 0));
  const LayoutCost best = evaluate_layout(m, sys, chosen);
  EXPECT_LT(best.time.step, 0.98 * even.time.step);
  EXPECT_LT(best.time.bubble_fraction, even.time.bubble_fraction);
  // The search returns that split for the pipeline layout, and its string
  // says so.
  SearchSpace sp = pipeline_space(2);
  const SearchResult r = search_layouts(m, sys, sp);
  ASSERT_EQ(r.ranked.size(), 1u);
  EXPECT_EQ(r.ranked[0].layout.str(), chosen.str());
  const std::string name = chosen.str();
  EXPECT_TRUE(name.find(" first ") != std::string::npos || name.find(" last ") != std::string::npos)
      << name;
  sp.uneven_stages = false;
  EXPECT_FALSE(search_layouts(m, sys, sp).ranked[0].layout.par.uneven_stages());
}

TEST(PlanStageSplit, CheapHeadKeepsTheEvenSplit) {
  // A head far below one layer: no whole layer moved can help.
  GPTConfig m = model(6, 1);
  m.vocab_size = 256;
  const SystemSpec sys = load_system("local");
  ParamCounter params(m);
  CostOptions screen;
  screen.simulate_schedule = false;
  EXPECT_FALSE(best_stage_split(m, sys, pipeline(0, 0), params, screen).par.uneven_stages());
  // A split already on the layout is chosen afresh: here the even one.
  EXPECT_FALSE(best_stage_split(m, sys, pipeline(5, 0), params, screen).par.uneven_stages());
  // Not a pipeline: returned as it is.
  PlanLayout flat = pipeline(0, 0);
  flat.par.pp = 1;
  flat.par.dp = 2;
  EXPECT_EQ(best_stage_split(m, sys, flat, params, screen).str(), flat.str());
}


TEST(PlanStageSplit, PipelineDepthThatDoesNotDivideTheLayersGetsAnUnevenSplit) {
  // 10 layers over 4 stages: no even split exists, but Megatron runs it
  // with lighter ends (e.g. 1 | 3 | 3 | 3 or 2 | 3 | 3 | 2), and so does
  // the engine. Before, the planner dropped pp 4 altogether.
  const GPTConfig m = model(10, 1);
  const SystemSpec sys = load_system("local");
  SearchSpace sp = pipeline_space(4);
  const SearchResult r = search_layouts(m, sys, sp);
  ASSERT_EQ(r.ranked.size(), 1u);
  const ParallelConfig& par = r.ranked[0].layout.par;
  ASSERT_TRUE(par.uneven_stages()) << r.ranked[0].layout.str();
  int64_t total = 0, largest = 0;
  for (int64_t s = 0; s < 4; ++s) {
    const int64_t n = par.stage_layer_count(m.num_layers, s);
    EXPECT_GE(n, 1) << "stage " << s;
    total += n;
    largest = std::max(largest, n);
  }
  EXPECT_EQ(total, 10);
  EXPECT_EQ(largest, 3);  // as balanced as whole layers allow
  EXPECT_NO_THROW(par.validate(m, 4));
  // With the planner's splits turned off, or the run's own split fixed to
  // one the engine refuses, pp 4 does not exist.
  sp.uneven_stages = false;
  EXPECT_TRUE(search_layouts(m, sys, sp).ranked.empty());
  sp.uneven_stages = true;
  sp.first_stage_layers = 5;  // 5 + 3 x (5 / 3): no
  EXPECT_TRUE(search_layouts(m, sys, sp).ranked.empty());
  // A fixed split the engine takes is kept as it is, not re-chosen.
  sp.first_stage_layers = 4;  // 4 | 2 | 2 | 2
  const SearchResult fixed = search_layouts(m, sys, sp);
  ASSERT_EQ(fixed.ranked.size(), 1u);
  EXPECT_EQ(fixed.ranked[0].layout.par.first_stage_layers, 4);
  EXPECT_FALSE(fixed.ranked[0].layout.par.last_stage_layers.has_value());
}

TEST(PlanStageSplit, Llama405BRunsSixteenStagesOver126Layers) {
  // Llama 3 405B has 126 layers; 16 pipeline stages (as Meta trained it)
  // need uneven ends, e.g. 7 | 8 x 14 | 7 (the docs/planner.md table).
  const GPTConfig m = load_model("llama-3-405b");
  const SystemSpec sys = load_system("h100");
  SearchSpace sp;
  sp.devices = 8 * 16 * 64;  // Meta's 8192 GPUs: tp 8, pp 16, dp 64
  sp.global_batch = 2048;
  sp.tp = {8};
  sp.pp = {16};
  const SearchResult r = search_layouts(m, sys, sp);
  ASSERT_FALSE(r.ranked.empty());
  const ParallelConfig& par = r.ranked[0].layout.par;
  EXPECT_EQ(par.pp, 16);
  ASSERT_TRUE(par.uneven_stages()) << r.ranked[0].layout.str();
  EXPECT_NO_THROW(par.validate(m, sp.devices));
  int64_t largest = 0;
  for (int64_t s = 0; s < 16; ++s) largest = std::max(largest, par.stage_layer_count(126, s));
  EXPECT_EQ(largest, 8);
}

// The planner's context parallelism (issue 36 item 3; plan/context_parallel_cost.h):
// a cp rank's activations are its T / cp tokens', its attention 1 / cp of
// the causal pairs, its K/V ring hidden behind the attention where the
// attention is long enough, and gradients and ZeRO state over dp x cp.
#include <gtest/gtest.h>

#include "expect_error.h"
#include "temp_file.h"
#include "tessera/plan/context_parallel_cost.h"
#include "tessera/plan/layer_ops.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/run_metrics.h"
#include "tessera/plan/search.h"
#include "tessera/plan/system.h"
#include "tessera/plan/validate.h"

using namespace tessera;
using namespace tessera::plan;

namespace {

GPTConfig llama8b(int64_t seq) {
  GPTConfig m = find_preset("llama-3-8b")->config;
  m.seq_length = seq;
  return m;
}

PlanLayout layout(int64_t tp, int64_t cp, int64_t dp, Recompute rc = Recompute::None) {
  PlanLayout L;
  L.par.tp = tp;
  L.par.cp = cp;
  L.par.dp = dp;
  L.par.pp = 1;
  L.par.micro_batch = 1;
  L.par.global_batch = dp;
  L.par.recompute = rc;
  L.par.sequence_parallel = tp > 1;
  return L;
}

}  // namespace

TEST(PlanContextParallel, ActivationsHalveFromCp1ToCp2) {
  const SystemSpec sys = load_system("h100");
  const GPTConfig m = llama8b(32768);
  for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full}) {
    const LayoutCost one = evaluate_layout(m, sys, layout(8, 1, 2, rc));
    const LayoutCost two = evaluate_layout(m, sys, layout(8, 2, 1, rc));
    const StageCost& a = one.stages.front();
    const StageCost& b = two.stages.front();
    // The layers' stored activations are linear in the tokens a rank holds.
    EXPECT_NEAR(b.layer_activations / a.layer_activations, 0.5, 1e-9) << recompute_name(rc);
    // Everything (the head's logits, the ring's blocks) about half.
    EXPECT_GT(b.activations / a.activations, 0.5) << recompute_name(rc);
    EXPECT_LT(b.activations / a.activations, 0.56) << recompute_name(rc);
    // dp x cp = 2 both times: the same ZeRO-free state, the same parameters.
    EXPECT_DOUBLE_EQ(a.state.total(), b.state.total());
  }
  // The engine's own arena (fp32, a tiny model at 16k tokens: the run the
  // issue measures) halves too.
  GPTConfig tiny = find_preset("llama-tiny")->config;
  tiny.seq_length = 16384;
  PlanLayout e1 = layout(1, 1, 1), e2 = layout(1, 2, 1);
  for (PlanLayout* L : {&e1, &e2}) L->precision = Precision::Fp32, L->engine = true;
  const double one_rank = stage_activations(tiny, e1, 0).total;
  const double two_ranks = stage_activations(tiny, e2, 0).total;
  // Half the arena, plus the ring's scratch (5 fp32 K/V blocks of 8192 rows
  // x 2 kv heads x 64, dq and D: model/context_parallel.h).
  const double scratch = cp_buffer_bytes(tiny, e2);
  EXPECT_NEAR(scratch, 5 * 2.0 * 8192 * 128 * 4 + 4.0 * 8192 * 4 * 65, 1.0);
  EXPECT_NEAR(two_ranks - scratch, 0.5 * one_rank, 1e-9 * one_rank);
}

TEST(PlanContextParallel, ZeroShardsAndReducesOverDpTimesCp) {
  const SystemSpec sys = load_system("h100");
  const GPTConfig m = llama8b(32768);
  PlanLayout dp4 = layout(2, 1, 4), dp2cp2 = layout(2, 2, 2);
  dp4.par.zero_stage = dp2cp2.par.zero_stage = 1;
  dp2cp2.par.global_batch = 2;
  const LayoutCost a = evaluate_layout(m, sys, dp4), b = evaluate_layout(m, sys, dp2cp2);
  // Adam's state split four ways in both.
  EXPECT_DOUBLE_EQ(a.stages.front().state.optimizer, b.stages.front().state.optimizer);
  EXPECT_GT(b.time.dp_reduce, 0.0);
  // The same gradient bytes over a group of four ranks tp apart.
  EXPECT_NEAR(b.time.dp_reduce, a.time.dp_reduce, 1e-12);
}

TEST(PlanContextParallel, AttentionPerRankIsOneCpthOfTheCausalPairs) {
  const SystemSpec sys = load_system("h100");
  const GPTConfig m = llama8b(65536);
  const PlanLayout one = layout(1, 1, 1), four = layout(1, 4, 1);
  const LayerOps a = layer_ops(m, sys, one), b = layer_ops(m, sys, four);
  EXPECT_NEAR(b.forward[Op::Attention] / a.forward[Op::Attention], 0.25, 0.01);
  // Token-wise GEMMs: a quarter of the rows.
  EXPECT_NEAR(b.forward[Op::Gemm] / a.forward[Op::Gemm], 0.25, 0.03);
}

TEST(PlanContextParallel, RingHiddenBehindLongAttentionExposedBehindShort) {
  const SystemSpec sys = load_system("h100");
  const GPTConfig m = llama8b(131072);
  const PlanLayout L = layout(1, 8, 1);
  // The traffic of a layer, and what shows with no attention to hide behind.
  const CpLayerComm bare = cp_layer_comm(m, sys, L, 0.0, 0.0);
  ASSERT_GT(bare.forward, 0.0);
  EXPECT_DOUBLE_EQ(bare.forward_exposed, bare.forward);
  EXPECT_DOUBLE_EQ(bare.backward_exposed, bare.backward);
  // With the layer's real attention (128k tokens over 8 ranks in a node):
  // all but the system's overlap loss hides.
  const LayerOps lo = layer_ops(m, sys, L);
  const CpLayerComm real =
      cp_layer_comm(m, sys, L, lo.forward[Op::Attention], lo.backward[Op::Attention]);
  EXPECT_LT(real.forward_exposed, 0.25 * real.forward);
  EXPECT_LT(real.backward_exposed, 0.5 * real.backward);
  // A short sequence over nodes (tp 8 x cp 8 spans 8 nodes of 8): the
  // attention no longer covers the ring.
  const GPTConfig s = llama8b(8192);
  PlanLayout across = layout(8, 8, 1);
  const LayerOps so = layer_ops(s, sys, across);
  const CpLayerComm shown =
      cp_layer_comm(s, sys, across, so.forward[Op::Attention], so.backward[Op::Attention]);
  EXPECT_GT(shown.forward_exposed / shown.forward, real.forward_exposed / real.forward);
  // all_gather: nothing beside it, all of it waits.
  PlanLayout ag = L;
  ag.par.cp_comm = CpCommType::AllGather;
  const CpLayerComm g = cp_layer_comm(m, sys, ag, lo.forward[Op::Attention], lo.backward[Op::Attention]);
  EXPECT_DOUBLE_EQ(g.forward_exposed, g.forward);
  EXPECT_GT(g.forward, 0.0);
  // The step's breakdown names it.
  const LayoutCost c = evaluate_layout(m, sys, L);
  EXPECT_GT(c.time.cp_comm, 0.0);
  EXPECT_NE(c.layout.str().find("cp 8"), std::string::npos);
}

TEST(PlanContextParallel, CpThatDoesNotSplitTheSequenceIsRefused) {
  const SystemSpec sys = load_system("h100");
  const GPTConfig m = llama8b(8192);
  // 8192 tokens do not split into 2 x 3 chunks.
  EXPECT_TRUE(test::throws_error_with([&] { evaluate_layout(m, sys, layout(1, 3, 2)); },
                                      {"--context-parallel-size"}));
}

TEST(PlanContextParallel, Llama3At128kPlansWithContextParallelism) {
  const SystemSpec sys = load_system("h100");
  const GPTConfig m = llama8b(131072);
  SearchSpace sp;
  sp.devices = 64;
  sp.global_batch = 64;
  sp.cp = {8};
  const SearchResult r = search_layouts(m, sys, sp);
  ASSERT_FALSE(r.ranked.empty());
  const LayoutCost& best = r.ranked.front();
  EXPECT_EQ(best.layout.par.cp, 8);
  EXPECT_LE(best.peak_memory, sys.usable_memory());
  // Without --cp the search tries cp at this length...
  SearchSpace any = sp;
  any.cp.clear();
  any.pp = {1};
  EXPECT_GT(cp_candidates(m, any).size(), 1u);
  // ... and not at 8k, where every plan stays as before.
  EXPECT_EQ(cp_candidates(llama8b(8192), any), std::vector<int64_t>{1});
}

TEST(PlanContextParallel, MetricsHeaderCarriesCp) {
  const std::string path = write_temp(
      "cp_metrics.jsonl",
      R"({"run": {"model": {"num_layers": 2, "hidden_size": 128, "num_heads": 4, "seq_length": 64,)"
      R"( "vocab_size": 512}, "parallel": {"tp": 1, "pp": 1, "dp": 1, "cp": 2, "cp_comm": "all_gather",)"
      R"( "micro_batch": 1, "global_batch": 1, "zero_stage": 0, "recompute": "none", "schedule": "1f1b"},)"
      R"( "threads": 1, "system": "local"}})"
      "\n{\"step\": 1, \"loss\": 3.0, \"step_seconds\": 0.1}\n");
  const RunMetrics r = read_run_metrics(path);
  EXPECT_EQ(r.par.cp, 2);
  EXPECT_EQ(r.par.cp_comm, CpCommType::AllGather);
  EXPECT_EQ(r.par.world(), 2);
  const std::string bad = write_temp(
      "cp_metrics_bad.jsonl",
      R"({"run": {"model": {"num_layers": 2, "hidden_size": 128, "num_heads": 4, "seq_length": 64,)"
      R"( "vocab_size": 512}, "parallel": {"tp": 1, "pp": 1, "dp": 1, "cp": "two",)"
      R"( "micro_batch": 1, "global_batch": 1}}})"
      "\n{\"step\": 1, \"loss\": 3.0, \"step_seconds\": 0.1}\n");
  EXPECT_TRUE(test::throws_error_with([&] { read_run_metrics(bad); }, {"cp"}));
}

TEST(PlanContextParallel, ValidateRunsACpRun) {
  // A cp 2 run's metrics (the header as the trainer writes it at cp 2):
  // predicted at its layout, memory of T / cp tokens a rank.
  std::string steps;
  for (int i = 1; i <= 5; ++i)
    steps += "{\"step\": " + std::to_string(i) + ", \"step_seconds\": 0.5}\n";
  auto run = [&](int cp, int dp) {
    return write_temp(
        "cp_validate_" + std::to_string(cp) + ".jsonl",
        std::string(R"({"run": {"model": {"num_layers": 2, "hidden_size": 128, "num_heads": 4,)"
                    R"( "seq_length": 16384, "vocab_size": 512}, "parallel": {"tp": 1, "pp": 1,)") +
            " \"dp\": " + std::to_string(dp) + ", \"cp\": " + std::to_string(cp) +
            R"(, "micro_batch": 1, "global_batch": 2}, "memory_bytes": {"params": 1e6, "grads": 1e6,)"
            R"( "optimizer": 2e6, "activations": 1e8}, "threads": 1}})" "\n" + steps);
  };
  const SystemSpec sys = load_system("h100");
  const Validation one = validate_runs({run(1, 2)}, sys), two = validate_runs({run(2, 1)}, sys);
  ASSERT_EQ(two.runs.size(), 1u);
  EXPECT_NE(two.runs[0].predicted.layout.str().find("cp 2"), std::string::npos);
  const double a = one.runs[0].predicted.stages.front().activations;
  const double b = two.runs[0].predicted.stages.front().activations;
  const double scratch = cp_buffer_bytes(two.runs[0].run.model, two.runs[0].predicted.layout);
  EXPECT_GT(scratch, 0.0);
  EXPECT_NEAR(b - scratch, 0.5 * a, 1e-9 * a);
}

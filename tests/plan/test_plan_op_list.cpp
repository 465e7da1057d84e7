// The planner prices the engine's op list (model/op_list.h) and asks the
// engine which layouts are valid: the predicted layer time is the sum of its
// entries' prices; a kernel appended to the list is priced with no other
// edit; the search enumerates exactly the layouts ParallelConfig::validate
// accepts (less the planner's own rules); `--by-op` parts add up to the step.
#include <gtest/gtest.h>

#include "tessera/model/op_list.h"
#include "tessera/plan/by_op_report.h"
#include "tessera/plan/layer_ops.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/search.h"
#include "tessera/plan/system.h"

using namespace tessera;
using namespace tessera::plan;

namespace {

SystemSpec a100() {
  return load_system(std::string(TESSERA_SOURCE_DIR) + "/configs/systems/dgx-a100-80gb.toml");
}

PlanLayout tp8(bool sp, Recompute rc) {
  PlanLayout L;
  L.par.tp = 8;
  L.par.pp = 2;
  L.par.micro_batch = 1;
  L.par.global_batch = 8;
  L.par.sequence_parallel = sp;
  L.par.recompute = rc;
  return L;
}

}  // namespace

TEST(PlanOpList, LayerTimeIsTheSumOfTheListsEntries) {
  const SystemSpec sys = a100();
  GPTConfig m = load_model("gpt3-2.7b");
  m.hidden_dropout = 0.1f;
  for (bool sp : {false, true})
    for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full}) {
      const PlanLayout L = tp8(sp, rc);
      const OpList ol = op_list(op_list_config(m, L));
      double fw = 0, bw = 0, re = 0, dropout = 0;
      for (const OpEntry& e : ol.layer) {
        const double s = op_seconds(e, sys, L);
        EXPECT_GE(s, 0.0) << e.what;
        (e.phase == OpPhase::Forward ? fw : e.phase == OpPhase::Backward ? bw : re) += s;
        if (e.op == Op::Dropout) dropout += s;
      }
      const LayerOps lo = layer_ops(m, sys, L);
      EXPECT_NEAR(lo.forward.total(), fw, 1e-12 * fw);
      EXPECT_NEAR(lo.backward.total(), bw, 1e-12 * bw);
      EXPECT_NEAR(lo.recompute.total(), re, 1e-12 * (re + 1));
      EXPECT_GT(dropout, 0.0) << "hidden dropout is priced";
      EXPECT_EQ(re == 0.0, rc == Recompute::None);
      // Full recomputation re-runs exactly the forward, collectives included.
      if (rc == Recompute::Full) EXPECT_NEAR(re, fw, 1e-12 * fw);
    }
}

TEST(PlanOpList, AnEntryAddedToTheListIsPricedWithoutAnotherEdit) {
  const SystemSpec sys = a100();
  const GPTConfig m = load_model("gpt3-2.7b");
  const PlanLayout L = tp8(false, Recompute::None);
  OpList ol = op_list(op_list_config(m, L));
  const double before = layer_ops(ol, sys, L).forward[Op::Gemm];
  OpEntry extra = ol.layer.front();
  for (const OpEntry& e : ol.layer)
    if (std::string(e.what) == "mlp.fc" && e.phase == OpPhase::Forward) extra = e;
  ol.layer.push_back(extra);
  const double after = layer_ops(ol, sys, L).forward[Op::Gemm];
  EXPECT_NEAR(after - before, op_seconds(extra, sys, L), 1e-15);
  EXPECT_GT(after, before);
}

TEST(PlanOpList, EngineCollectivesAreFp32GpuActivationCollectives16Bit) {
  const SystemSpec sys = a100();
  const GPTConfig m = load_model("gpt3-2.7b");
  PlanLayout L = tp8(false, Recompute::None);
  const double megatron = layer_ops(m, sys, L).forward[Op::Comm];
  L.engine = true;  // tessera's own bf16: the all-reduces carry fp32
  const double engine = layer_ops(m, sys, L).forward[Op::Comm];
  EXPECT_GT(engine, 1.5 * megatron);
}

TEST(PlanOpList, SearchKeepsExactlyWhatTheEngineAccepts) {
  const SystemSpec sys = a100();
  GPTConfig m = load_model("gpt3-2.7b");
  m.seq_length = 2044;  // divisible by 2 and 4, not by 8: no SP at tp 8
  SearchSpace sp;
  sp.devices = 16;
  sp.global_batch = 32;
  const std::vector<PlanLayout> layouts = enumerate_layouts(m, sys, sp);
  ASSERT_FALSE(layouts.empty());
  bool tp8_plain = false, tp4_sp = false;
  for (const PlanLayout& L : layouts) {
    EXPECT_NO_THROW(L.par.validate(m, L.devices())) << L.str();
    EXPECT_FALSE(L.par.tp == 8 && L.par.sequence_parallel) << L.str();
    tp8_plain = tp8_plain || (L.par.tp == 8 && !L.par.sequence_parallel);
    tp4_sp = tp4_sp || (L.par.tp == 4 && L.par.sequence_parallel);
    // The planner's own rules.
    EXPECT_LE(L.par.tp, sys.devices_per_node);
    EXPECT_FALSE(L.par.dp == 1 && L.par.zero_stage > 0);
    EXPECT_FALSE(L.par.tp == 1 && L.par.sequence_parallel);
    EXPECT_FALSE(L.par.pp == 1 && L.par.schedule == ScheduleKind::GPipe);
  }
  EXPECT_TRUE(tp8_plain);
  EXPECT_TRUE(tp4_sp);
  // Interleaved needs micro-batches % pp == 0 (the engine's schedule rule):
  // every interleaved layout found has it, and some exist.
  int interleaved = 0;
  for (const PlanLayout& L : layouts)
    if (L.par.schedule == ScheduleKind::Interleaved) {
      ++interleaved;
      EXPECT_EQ(L.micro_batches() % L.par.pp, 0) << L.str();
    }
  EXPECT_GT(interleaved, 0);
}

TEST(PlanOpList, ByOpPartsAddUpToTheStep) {
  const SystemSpec sys = a100();
  const GPTConfig m = load_model("gpt3-2.7b");
  PlanLayout L = tp8(true, Recompute::Selective);
  L.par.pp = 2;
  L.par.dp = 1;
  const LayoutCost c = evaluate_layout(m, sys, L);
  const ByOpReport r = by_op(m, sys, c);
  ASSERT_EQ(r.stages.size(), 2u);
  for (const StageByOp& s : r.stages) {
    const double sum = s.gemm + s.attention + s.memory_bound + s.tp_all_reduce +
                       s.tp_all_gather + s.tp_reduce_scatter + s.zero3_gather + s.bubble +
                       s.dp_exposed + s.embedding_sync + s.sync_wait + s.optimizer + s.idle_after;
    EXPECT_NEAR(sum, c.time.step, 1e-9 * c.time.step) << "stage " << s.stage;
    // The tp collectives by kind are the stage's communication (no dp, no
    // ZeRO-3 here; the embedding sync and sync wait are step-level terms).
    const StageCost& sc = c.stages[size_t(s.stage)];
    EXPECT_NEAR(s.tp_all_reduce + s.tp_all_gather + s.tp_reduce_scatter,
                sc.ops[Op::Comm] - s.embedding_sync - s.sync_wait, 1e-9 * sc.ops[Op::Comm]);
    EXPECT_GT(s.tp_all_gather, 0.0);
  }
  // The last stage runs the head: its bubble is the pipeline's.
  EXPECT_NEAR(r.stages.back().bubble, c.time.bubble, 1e-9);
  EXPECT_NEAR(r.mfu, c.mfu, 1e-15);
  EXPECT_GT(r.hfu, r.mfu);  // selective recompute runs attention again
  EXPECT_NEAR(r.hardware_tflops / r.model_tflops, c.hardware_flops / c.model_flops, 1e-12);
}

// zb-h1 and zbv with ZeRO-2/3 (issue 36), priced as the engine runs them
// (parallel/data_parallel.h, split_backward): each stage's gradient is held
// unsharded from its first input pass to its chunk's last weight pass, and
// ZeRO-3 gathers each layer for the weight pass too (three gathers per
// micro-batch and layer where 1F1B has two).
#include <gtest/gtest.h>

#include "tessera/config/parallel_config.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/system.h"

using namespace tessera;
using namespace tessera::plan;

namespace {

// The engine's own run of a mid-size model: pp 4 x dp 2, fp32.
PlanLayout engine_layout(ScheduleKind kind, int zero) {
  PlanLayout L;
  L.par.tp = 1;
  L.par.pp = 4;
  L.par.dp = 2;
  L.par.micro_batch = 1;
  L.par.global_batch = 16;  // 8 micro-batches a replica
  L.par.zero_stage = zero;
  L.par.schedule = kind;
  L.par.virtual_stages = kind == ScheduleKind::ZeroBubbleV ? 2 : 1;
  L.precision = Precision::Fp32;
  L.engine = true;
  return L;
}

}  // namespace

TEST(ZeroBubbleSharded, HoldsTheStagesGradientUnshardedThroughTheBackward) {
  const GPTConfig m = find_preset("llama-3-8b")->config;
  const SystemSpec sys = load_system("h100");
  for (ScheduleKind zb : {ScheduleKind::ZeroBubbleH1, ScheduleKind::ZeroBubbleV}) {
    SCOPED_TRACE(schedule_kind_name(zb));
    const LayoutCost zb1 = evaluate_layout(m, sys, engine_layout(zb, 1));
    const LayoutCost zb2 = evaluate_layout(m, sys, engine_layout(zb, 2));
    const LayoutCost zb3 = evaluate_layout(m, sys, engine_layout(zb, 3));
    ASSERT_EQ(zb2.stages.size(), zb1.stages.size());
    for (size_t s = 0; s < zb2.stages.size(); ++s) {
      // ZeRO-1 holds the full gradient; ZeRO-2/3 under a split backward
      // hold it too, beside their shard of it (dp 2: half again).
      const double full = zb1.stages[s].state.grads;
      EXPECT_NEAR(zb2.stages[s].state.grads, 1.5 * full, 1e-9 * full);
      EXPECT_NEAR(zb3.stages[s].state.grads, 1.5 * full, 1e-9 * full);
      EXPECT_DOUBLE_EQ(zb2.stages[s].state.optimizer, zb1.stages[s].state.optimizer);
    }
  }
  // 1F1B's ZeRO-2 holds the shard only (its buffers live one backward).
  const LayoutCost ob1 = evaluate_layout(m, sys, engine_layout(ScheduleKind::OneFOneB, 1));
  const LayoutCost ob2 = evaluate_layout(m, sys, engine_layout(ScheduleKind::OneFOneB, 2));
  const LayoutCost zb1 = evaluate_layout(m, sys, engine_layout(ScheduleKind::ZeroBubbleH1, 1));
  for (size_t s = 0; s < ob2.stages.size(); ++s) {
    EXPECT_DOUBLE_EQ(zb1.stages[s].state.grads, ob1.stages[s].state.grads);
    EXPECT_NEAR(ob2.stages[s].state.grads, 0.5 * ob1.stages[s].state.grads,
                1e-9 * ob1.stages[s].state.grads);
  }
}

TEST(ZeroBubbleSharded, ZeroThreeGathersForTheWeightPassToo) {
  const GPTConfig m = find_preset("llama-3-8b")->config;
  const SystemSpec sys = load_system("h100");
  const LayoutCost ob = evaluate_layout(m, sys, engine_layout(ScheduleKind::OneFOneB, 3));
  const LayoutCost zb = evaluate_layout(m, sys, engine_layout(ScheduleKind::ZeroBubbleH1, 3));
  ASSERT_GT(ob.time.zero3_gather, 0.0);
  // F, B and W each wait for the layer's gather in the engine: 3 against 2.
  EXPECT_NEAR(zb.time.zero3_gather / ob.time.zero3_gather, 1.5, 1e-9);
  // Its parameters stay sharded: the gradient is what zb holds in full.
  for (size_t s = 0; s < zb.stages.size(); ++s)
    EXPECT_DOUBLE_EQ(zb.stages[s].state.params, ob.stages[s].state.params);
}

// --overlap-grad-reduce and --overlap-param-gather in the planner: a run's
// setting (issue 13), priced as the engine runs it — without them the
// data-parallel collectives are exposed whatever the machine's comm_overlap.
#include <gtest/gtest.h>

#include "tessera/plan/layout_cost.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/system.h"

using namespace tessera;
using namespace tessera::plan;

namespace {

// GPT-3 XL (1.3B) on 4 DGX A100 nodes: tp 2 x dp 16, so the dp reduction crosses nodes.
LayoutCost cost(int zero, bool grad, bool param) {
  const SystemSpec sys = load_system("dgx-a100-80gb");
  PlanLayout L;
  L.par.tp = 2;
  L.par.pp = 1;
  L.par.dp = 16;
  L.par.micro_batch = 2;
  L.par.global_batch = 128;
  L.par.zero_stage = zero;
  L.overlap_grad_reduce = grad;
  L.overlap_param_gather = param;
  return evaluate_layout(load_model("gpt3-xl"), sys, L);
}

}  // namespace

TEST(PlanOverlap, WithoutOverlapTheWholeReductionIsExposed) {
  for (int zero : {0, 1}) {
    const LayoutCost off = cost(zero, false, false);
    ASSERT_GT(off.time.dp_reduce, 0.0);
    EXPECT_DOUBLE_EQ(off.time.dp_exposed, off.time.dp_reduce) << "zero " << zero;
    const LayoutCost on = cost(zero, true, false);
    EXPECT_DOUBLE_EQ(on.time.dp_reduce, off.time.dp_reduce);
    EXPECT_LT(on.time.dp_exposed, off.time.dp_exposed) << "zero " << zero;
    EXPECT_LT(on.time.step, off.time.step) << "zero " << zero;
  }
}

TEST(PlanOverlap, ParamGatherHidesBehindTheNextForward) {
  const LayoutCost grad_only = cost(1, true, false);
  const LayoutCost both = cost(1, true, true);
  EXPECT_LT(both.time.dp_exposed, grad_only.time.dp_exposed);
  // ZeRO-0 has no gather to hide: the flag changes nothing.
  EXPECT_DOUBLE_EQ(cost(0, true, true).time.dp_exposed, cost(0, true, false).time.dp_exposed);
  EXPECT_NE(both.layout.str().find("opg"), std::string::npos) << both.layout.str();
}

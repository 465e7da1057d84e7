// FSDP2 under torch.distributed.pipelining (plan/fsdp_pipelining.h): each
// rank holds its stage's gradients unsharded in the reduce dtype until the
// last backward, and folds every micro-batch's gradients into them.
#include <gtest/gtest.h>

#include "expect_error.h"
#include "temp_file.h"
#include "tessera/plan/fsdp_pipelining.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/published.h"
#include "tessera/plan/system.h"

using namespace tessera;
using namespace tessera::plan;
using tessera::test::throws_error_with;

namespace {

// torchtitan's 405B layout at a smaller model: tp 8, pp 4, FSDP 2 as ZeRO-2.
PlanLayout torchtitan_pp() {
  PlanLayout L;
  L.par.tp = 8;
  L.par.pp = 4;
  L.par.dp = 2;
  L.par.micro_batch = 1;
  L.par.global_batch = 16;  // 8 micro-batches a replica
  L.par.zero_stage = 2;
  L.par.recompute = Recompute::Full;
  L.par.sequence_parallel = true;
  L.precision = Precision::Bf16;
  L.grad_reduce_bytes = 4;  // torchtitan's reduce_dtype fp32
  return L;
}

}  // namespace

TEST(Fsdp2Pipelining, HoldsTheStagesGradientsUnshardedInTheReduceDtype) {
  const GPTConfig m = find_preset("llama-3-70b")->config;
  const SystemSpec sys = load_system("h100");
  PlanLayout L = torchtitan_pp();
  PlanLayout P = L;
  P.fsdp2_pipelining = true;
  const LayoutCost a = evaluate_layout(m, sys, L), b = evaluate_layout(m, sys, P);
  ASSERT_EQ(a.stages.size(), b.stages.size());
  for (size_t s = 0; s < a.stages.size(); ++s) {
    // 4 bytes a parameter of the stage on its tp rank, nothing else.
    EXPECT_NEAR(b.stages[s].state.grads - a.stages[s].state.grads, 4.0 * double(a.stages[s].params), 1.0);
    EXPECT_DOUBLE_EQ(b.stages[s].state.params, a.stages[s].state.params);
    EXPECT_DOUBLE_EQ(b.stages[s].activations, a.stages[s].activations);
  }
  // A bf16 reduce keeps the 16-bit .grad as the accumulator: 2 bytes.
  PlanLayout bf = P;
  bf.grad_reduce_bytes = 2;
  EXPECT_DOUBLE_EQ(fsdp2_pipelining_grad_bytes(bf, 100.0), 200.0);
  EXPECT_DOUBLE_EQ(fsdp2_pipelining_grad_bytes(L, 100.0), 0.0);  // not set: none
}

TEST(Fsdp2Pipelining, FoldsEachMicroBatchsGradientsIntoTheAccumulator) {
  const SystemSpec sys = load_system("h100");
  PlanLayout P = torchtitan_pp();
  P.fsdp2_pipelining = true;
  const double bw = sys.achieved_memory_bandwidth();
  // 8 micro-batches: one cast (2 + 4 bytes), seven adds (2 + 4 + 4).
  EXPECT_NEAR(fsdp2_pipelining_accumulate_seconds(sys, P, 1e9), (6.0 + 7 * 10.0) / 8 * 1e9 / bw, 1e-15);
  const GPTConfig m = find_preset("llama-3-70b")->config;
  PlanLayout L = torchtitan_pp();
  const LayoutCost a = evaluate_layout(m, sys, L), b = evaluate_layout(m, sys, P);
  EXPECT_GT(b.time.step, a.time.step);
  // The pass is memory-bound work of each layer's backward, charged as a cast.
  EXPECT_GT(b.stages[0].ops[Op::Cast], a.stages[0].ops[Op::Cast]);
  EXPECT_DOUBLE_EQ(b.stages[0].ops[Op::Gemm], a.stages[0].ops[Op::Gemm]);
}

TEST(Fsdp2Pipelining, ARowNeedsAPipelineAndFsdp) {
  const std::string run = R"([source]
key = "test"
citation = "made up for a test"
[[run]]
name = "no pipeline"
system = "h100"
model = "gpt3-6.7b"
devices = 8
micro-batch-size = 1
global-batch-size = 8
zero-stage = 2
recompute = "full"
precision = "bf16"
fsdp2-pipelining = true
step-seconds = 1.0
)";
  EXPECT_TRUE(throws_error_with([&] { load_published(write_temp("published_fsdp2pp.toml", run)); },
                                {"fsdp2-pipelining needs"}));
}

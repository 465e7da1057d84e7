// Ranks sharing CPU cores (layout_cost.cpp, core_sharing): on a calibrated
// CPU system with fewer cores than ranks x threads, ranks bound round-robin
// to the cores share a core's time. Partners busy together (data parallel)
// take the sum of their work; pipeline stages of one micro-batch take turns
// and lose almost nothing. bench/tune.sh's 4-rank runs on 2 cores measured
// exactly this: dp 4 no faster than pp 2 with one micro-batch.
#include <gtest/gtest.h>

#include <string>

#include "tessera/plan/layout_cost.h"
#include "tessera/plan/system.h"

using namespace tessera;
using namespace tessera::plan;

namespace {

SystemSpec local_with_cores(int64_t cores) {
  SystemSpec s = load_system(std::string(TESSERA_SOURCE_DIR) + "/configs/systems/local.toml");
  s.cores = cores;
  s.calibrated_threads = 1;
  return s;
}

GPTConfig small() {
  return GPTConfig{.num_layers = 4, .hidden_size = 128, .num_heads = 4, .seq_length = 64,
                   .vocab_size = 512};
}

PlanLayout layout(int64_t tp, int64_t pp, int64_t dp, int64_t micro_batch) {
  PlanLayout L;
  L.par.tp = tp, L.par.pp = pp, L.par.dp = dp;
  L.par.micro_batch = micro_batch;
  L.par.global_batch = 16;
  L.engine = true;
  L.precision = Precision::Fp32;
  return L;
}

// What one rank of `stage` keeps its core busy for in a step: its ops (the
// step kernels, exposed dp and sync waits included) less the waiting.
double busy(const LayoutCost& c, size_t stage) {
  return c.stages[stage].ops.total() - c.time.sync_wait;
}

}  // namespace

TEST(CoreSharing, NothingWhenEveryRankHasACore) {
  const LayoutCost two = evaluate_layout(small(), local_with_cores(2), layout(1, 1, 2, 4));
  EXPECT_EQ(two.time.core_sharing, 0.0);
  // A GPU system (no cores recorded): one rank per device, whatever the count.
  const LayoutCost gpu = evaluate_layout(small(), local_with_cores(0), layout(1, 1, 4, 4));
  EXPECT_EQ(gpu.time.core_sharing, 0.0);
}

TEST(CoreSharing, DataParallelPartnersOnOneCoreTakeTheirSum) {
  const LayoutCost dedicated = evaluate_layout(small(), local_with_cores(4), layout(1, 1, 4, 4));
  const LayoutCost shared = evaluate_layout(small(), local_with_cores(2), layout(1, 1, 4, 4));
  EXPECT_EQ(dedicated.time.core_sharing, 0.0);
  // Ranks 0 and 2 on core 0, 1 and 3 on core 1, all four busy at once.
  EXPECT_NEAR(shared.time.step, 2.0 * busy(shared, 0), 1e-12);
  EXPECT_NEAR(shared.time.step, dedicated.time.step + shared.time.core_sharing, 1e-12);
  EXPECT_GT(shared.time.core_sharing, 0.4 * shared.time.step);
  // Three ranks per core on 12: three times the work.
  PlanLayout dp12 = layout(1, 1, 12, 1);
  dp12.par.global_batch = 12;
  const LayoutCost twelve = evaluate_layout(small(), local_with_cores(4), dp12);
  EXPECT_NEAR(twelve.time.step, 3.0 * busy(twelve, 0), 1e-12);
  // Two threads a rank halve the core slots: 2 ranks on 2 cores share one.
  SystemSpec threads2 = local_with_cores(2);
  threads2.calibrated_threads = 2;
  const LayoutCost dp2 = evaluate_layout(small(), threads2, layout(1, 1, 2, 4));
  EXPECT_NEAR(dp2.time.step, 2.0 * busy(dp2, 0), 1e-12);
}

TEST(CoreSharing, PipelineStagesOfOneMicroBatchTakeTurns) {
  // pp 2 dp 2 with one micro-batch per replica: core 0 holds both stages of
  // replica 0 (ranks 0 and 2), which run one after the other anyway; only
  // their optimizer steps, at the same time, share the core.
  const LayoutCost turns = evaluate_layout(small(), local_with_cores(2), layout(1, 2, 2, 8));
  EXPECT_LT(turns.time.core_sharing, 0.1 * turns.time.step);
  // The core's load: both stages' work (each prices the larger stage's
  // optimizer step, hence the tolerance).
  EXPECT_NEAR(turns.time.step, std::max(turns.time.step - turns.time.core_sharing,
                                        busy(turns, 0) + busy(turns, 1)),
              0.02 * turns.time.step);
  // Against dp 4, whose partners are busy together, the pipeline no longer
  // looks twice as slow: within 25 % of it either way.
  const LayoutCost dp4 = evaluate_layout(small(), local_with_cores(2), layout(1, 1, 4, 4));
  EXPECT_LT(turns.time.step, 1.25 * dp4.time.step);
  EXPECT_GT(turns.time.step, 0.75 * dp4.time.step);
}

TEST(CoreSharing, CalibrationRecordsTheCores) {
  const SystemSpec s = load_system(std::string(TESSERA_SOURCE_DIR) + "/configs/systems/local.toml");
  EXPECT_GT(s.cores, 0);
  EXPECT_EQ(load_system("h100").cores, 0);
}

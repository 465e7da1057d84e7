// Ranks sharing CPU cores (layout_cost.cpp, core_sharing): on a calibrated
// CPU system with fewer cores than ranks x threads, ranks bound round-robin
// to the cores share a core's time. Partners busy together (data parallel)
// take the sum of their work; pipeline stages of one micro-batch take turns
// and lose almost nothing. bench/tune.sh's 4-rank runs on 2 cores measured
// exactly this: dp 4 no faster than pp 2 with one micro-batch.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tessera/plan/layout_cost.h"
#include "tessera/plan/report.h"
#include "tessera/plan/system.h"

using namespace tessera;
using namespace tessera::plan;

namespace {

SystemSpec local_with_cores(int64_t cores) {
  SystemSpec s = load_system(std::string(TESSERA_SOURCE_DIR) + "/configs/systems/local.toml");
  s.cores = cores;
  s.calibrated_threads = 1;
  s.kernel_ranks = 1;  // its kernels measured by one rank per core (calibrate_run.cpp)
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

// A calibration of 4 ranks on 2 cores from before 2026-12-02 (no
// kernel_ranks): all four measured at once, so its kernel times hold a
// share of the sharing, which the planner adds again (the 4-rank tune bench
// planned every layout at 2.1x its measured step); it says to calibrate
// again. The sharing is still priced per layout: left out, the same file
// ranked the bench's layouts no better than chance (layout_cost.cpp).
TEST(CoreSharing, WarnsOfACalibrationWhoseRanksAllMeasured) {
  SystemSpec old = local_with_cores(2);
  old.calibrated_ranks = 4;
  old.kernel_ranks = 0;
  EXPECT_TRUE(old.kernels_include_sharing());
  const LayoutCost dp4 = evaluate_layout(small(), old, layout(1, 1, 4, 4));
  EXPECT_GT(dp4.time.core_sharing, 0.4 * dp4.time.step);
  const std::string w = shared_core_calibration(old);
  EXPECT_NE(w.find("calibrated by 4 rank(s) x 1 thread(s) on 2 core(s)"), std::string::npos) << w;
  EXPECT_NE(w.find("scripts/mpirun.sh -n 4 build/tessera calibrate --threads 1"), std::string::npos)
      << w;
  for (size_t a = 0, b; a < w.size(); a = b + 1) {
    b = w.find('\n', a);
    if (b == std::string::npos) b = w.size();
    EXPECT_LE(b - a + 9, 100u) << w.substr(a, b - a);
  }
  // Planning on the file warns of it (with another CPU's, of that too).
  EXPECT_EQ(calibration_file_warnings(old, old.device_name), std::vector<std::string>{w});
  EXPECT_EQ(calibration_file_warnings(old, "another CPU").size(), 2u);
  // The same file written since (kernel_ranks = 2, one per core): the same
  // plan, no warning.
  SystemSpec fresh = old;
  fresh.kernel_ranks = 2;
  EXPECT_FALSE(fresh.kernels_include_sharing());
  EXPECT_EQ(shared_core_calibration(fresh), "");
  EXPECT_TRUE(calibration_file_warnings(fresh, fresh.device_name).empty());
  EXPECT_EQ(evaluate_layout(small(), fresh, layout(1, 1, 4, 4)).time.step, dp4.time.step);
  // Ranks within the cores: nothing to share, nothing to say.
  SystemSpec two = old;
  two.calibrated_ranks = 2;
  EXPECT_FALSE(two.kernels_include_sharing());
  EXPECT_EQ(shared_core_calibration(two), "");
}

TEST(CoreSharing, KernelRanksIsReadAndChecked) {
  const std::string head = "name = \"x\"\n[calibration]\nranks = 4\nthreads = 1\ncores = 2\n";
  const std::string rest =
      "[device]\nname = \"cpu\"\nmemory_GB = 10\nmemory_bandwidth_GBps = 10\n"
      "memory_efficiency = 1\npeak_TFLOPs = { fp32 = 0.1 }\n[node]\ndevices = 4\n"
      "[[network]]\nname = \"n\"\nranks = 0\nbandwidth_GBps = 1\nlatency_us = 1\n";
  EXPECT_EQ(load_system_text(head + "kernel_ranks = 2\n" + rest, "x.toml").kernel_ranks, 2);
  EXPECT_TRUE(load_system_text(head + rest, "x.toml").kernels_include_sharing());
  try {
    load_system_text(head + "kernel_ranks = 5\n" + rest, "x.toml");
    FAIL() << "kernel_ranks above ranks was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("x.toml: calibration.kernel_ranks must be in [0, "
                                         "calibration.ranks = 4] (got 5)"),
              std::string::npos)
        << e.what();
  }
}

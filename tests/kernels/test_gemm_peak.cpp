// The one GEMM-rate measurement (kernels/gemm_peak.h): how many repeats it
// times, and that every shape the planner calibrates (N/T, T/N, beta 1) runs.
#include <gtest/gtest.h>

#include <numeric>

#include "tessera/kernels/gemm_peak.h"

using namespace tessera;

TEST(GemmPeak, TimesExactlyMinRepsWhenNoMinimumTime) {
  const kernels::GemmShape shape{.M = 64, .N = 48, .K = 32};
  const auto t = kernels::gemm_fp32_seconds(shape, {.min_reps = 3, .min_seconds = 0});
  ASSERT_EQ(t.size(), 3u);
  for (double s : t) EXPECT_GT(s, 0.0);
  EXPECT_DOUBLE_EQ(shape.flops(), 2.0 * 64 * 48 * 32);
}

TEST(GemmPeak, RepeatsUntilTheMinimumTimeFromColdCaches) {
  const kernels::GemmShape weight_grad{.M = 48, .N = 32, .K = 64, .ta = 'T', .tb = 'N', .beta = 1};
  const auto t = kernels::gemm_fp32_seconds(
      weight_grad, {.min_reps = 1, .min_seconds = 0.005, .cold_caches = true});
  ASSERT_GE(t.size(), 1u);
  const double total = std::accumulate(t.begin(), t.end(), 0.0);
  EXPECT_TRUE(total >= 0.005 || t.size() == 500u) << t.size() << " repeats, " << total << " s";
}

TEST(GemmPeak, TheForwardShapeRuns) {
  const kernels::GemmShape forward{.M = 40, .N = 24, .K = 16, .ta = 'N', .tb = 'T'};
  EXPECT_EQ(kernels::gemm_fp32_seconds(forward, {.min_reps = 2}).size(), 2u);
}

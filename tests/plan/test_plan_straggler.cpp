// The slowest of a job's devices paces its step (plan/straggler.h): the
// expected maximum of n normal draws, the seconds it adds, and that a system
// without a cited spread (every CPU calibration) plans exactly as before.
#include <gtest/gtest.h>

#include <cmath>

#include "tessera/core/error.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/straggler.h"
#include "tessera/plan/system.h"
#include "tiny_system_toml.h"

using namespace tessera;
using namespace tessera::plan;

TEST(Straggler, ExpectedMaximumOfNormalsMatchesTheTables) {
  EXPECT_DOUBLE_EQ(expected_max_of_normals(1), 0.0);
  EXPECT_NEAR(expected_max_of_normals(2), 1.0 / std::sqrt(M_PI), 1e-5);  // 0.5642
  // Tabulated expected maxima of n standard normals (Tippett 1925; Harter 1961).
  EXPECT_NEAR(expected_max_of_normals(3), 0.8463, 1e-4);
  EXPECT_NEAR(expected_max_of_normals(8), 1.4236, 1e-4);
  EXPECT_NEAR(expected_max_of_normals(100), 2.5076, 1e-4);
  // Monotone in n, and sqrt(2 ln n)'s slow growth: 512 devices lie ~3 sd out.
  EXPECT_LT(expected_max_of_normals(128), expected_max_of_normals(512));
  EXPECT_NEAR(expected_max_of_normals(512), 3.04, 0.01);
}

TEST(Straggler, AddsTheSlowestDevicesShareOfTheDeviceBoundTime) {
  SystemSpec sys;
  EXPECT_DOUBLE_EQ(straggler_seconds(sys, 512, 10.0), 0.0);  // no spread cited: none
  sys.device_speed_spread = 0.0176;
  const double z = expected_max_of_normals(512);
  EXPECT_NEAR(straggler_seconds(sys, 512, 10.0), 10.0 * (1.0 / (1.0 - 0.0176 * z) - 1.0), 1e-12);
  EXPECT_DOUBLE_EQ(straggler_seconds(sys, 1, 10.0), 0.0);  // one device waits for nobody
  // In a plan: the step grows by the term, which the breakdown names.
  const GPTConfig m = find_preset("gpt3-6.7b")->config;
  SystemSpec h100 = load_system("h100");
  PlanLayout L;
  L.par.dp = 64;
  L.par.micro_batch = 2;
  L.par.global_batch = 256;
  L.par.zero_stage = 1;
  L.precision = Precision::Bf16;
  const LayoutCost with = evaluate_layout(m, h100, L);
  h100.device_speed_spread = 0;
  const LayoutCost without = evaluate_layout(m, h100, L);
  EXPECT_DOUBLE_EQ(without.time.straggler, 0.0);
  EXPECT_GT(with.time.straggler, 0.0);
  EXPECT_NEAR(with.time.step - without.time.step, with.time.straggler, 1e-12);
  // Over the GEMMs and attention only (one stage: nothing stretches them).
  const Profile& ops = without.stages[0].ops;
  EXPECT_NEAR(with.time.straggler / straggler_seconds(load_system("h100"), 64, ops[Op::Gemm] + ops[Op::Attention]),
              1.0, 1e-9);
}

TEST(Straggler, SystemFilesRangeCheckTheSpread) {
  auto with = [](const std::string& line) {
    std::string t = kTinySystemToml;
    const std::string at = "memory_efficiency = 1.0\n";
    return t.replace(t.find(at), at.size(), at + line);
  };
  EXPECT_DOUBLE_EQ(load_system_text(kTinySystemToml, "t").device_speed_spread, 0.0);
  EXPECT_DOUBLE_EQ(load_system_text(with("speed_spread = 0.02\n"), "t").device_speed_spread, 0.02);
  EXPECT_THROW(load_system_text(with("speed_spread = 0.5\n"), "t"), Error);
  EXPECT_THROW(load_system_text(with("speed_spread = -0.1\n"), "t"), Error);
}

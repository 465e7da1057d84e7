// The vectorizable exp/tanh used by softmax, cross-entropy and GELU.
#include <gtest/gtest.h>

#include <cmath>

#include "tessera/kernels/cpu/vec_math.h"

using namespace tessera;

TEST(VecMath, ExpWithinFewUlp) {
  double worst = 0;
  for (double x = -87.0; x <= 88.0; x += 0.001) {
    const double want = std::exp(double(float(x)));
    worst = std::max(worst, std::abs(cpu::exp_fast(float(x)) - want) / want);
  }
  EXPECT_LT(worst, 3e-7);  // 2.5 ulp
  EXPECT_EQ(cpu::exp_fast(0.0f), 1.0f);
  EXPECT_LT(cpu::exp_fast(-INFINITY), 1e-37f);  // clamped, not nan
  EXPECT_GE(cpu::exp_fast(-INFINITY), 0.0f);
  EXPECT_TRUE(std::isfinite(cpu::exp_fast(1000.0f)));
}

TEST(VecMath, TanhAbsoluteError) {
  double worst = 0;
  for (double x = -20.0; x <= 20.0; x += 0.0005)
    worst = std::max(worst, std::abs(cpu::tanh_fast(float(x)) - std::tanh(double(float(x)))));
  EXPECT_LT(worst, 3e-7);
}

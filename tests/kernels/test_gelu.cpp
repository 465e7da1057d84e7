// GELU (tanh form) against a double reference and central differences.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernel_test_util.h"
#include "tessera/kernels/cpu/bias.h"
#include "tessera/kernels/cpu/gelu.h"

using namespace tessera;

namespace {

double ref_gelu(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// Inputs spanning the saturated tails, the origin and the curved middle; n is
// not a multiple of 16 and large enough to take the threaded path.
std::vector<float> inputs() {
  auto x = test::randn(40001, 1, 3.0f);
  x[0] = 0.0f, x[1] = -20.0f, x[2] = 20.0f, x[3] = 1e-4f, x[4] = -1e-4f;
  return x;
}

TEST(Gelu, ForwardMatchesReference) {
  const auto x = inputs();
  std::vector<float> out(x.size());
  cpu::gelu_forward(out.data(), x.data(), int64_t(x.size()));
  double worst = 0;
  for (size_t i = 0; i < x.size(); i++)
    worst = std::max(worst, std::abs(out[i] - ref_gelu(x[i])) / (1.0 + std::abs(x[i])));
  EXPECT_LT(worst, 1e-6);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], 0.0f, 1e-6f);
  EXPECT_NEAR(out[2], 20.0f, 1e-5f);
}

// gelu' against central differences of the double reference (eps 1e-5), and
// the documented aliasing dinp == dout.
TEST(Gelu, BackwardMatchesFiniteDifferences) {
  const auto x = inputs();
  const auto dout = test::randn(int64_t(x.size()), 2);
  std::vector<float> dinp = dout;  // aliased: dinp overwrites dout in place
  cpu::gelu_backward(dinp.data(), x.data(), dinp.data(), int64_t(x.size()));
  double worst = 0;
  for (size_t i = 0; i < x.size(); i++) {
    const double eps = 1e-5;
    const double num = (ref_gelu(x[i] + eps) - ref_gelu(x[i] - eps)) / (2 * eps) * dout[i];
    worst = std::max(worst, std::abs(dinp[i] - num) / (1.0 + std::abs(num)));
  }
  EXPECT_LT(worst, 1e-5);
}

// The fc bias fused into GELU gives the bits of the bias pass then GELU, in
// the kept pre-activation and in the output: GPT-2 124M's fc (256 x 3072,
// threaded) and an odd width (the vector loop's remainder).
TEST(Gelu, BiasFusedEqualsBiasAddThenGelu) {
  const int64_t shapes[][2] = {{256, 3072}, {5, 37}};
  for (const auto& sh : shapes) {
    const int64_t N = sh[0], C = sh[1];
    const std::vector<float> pre0 = test::randn(N * C, 7, 2.0f), bias = test::randn(C, 8);  // (N, C), (C)
    std::vector<float> pre1 = pre0, out1(size_t(N * C));  // (N, C) unfused
    cpu::bias_add(pre1.data(), bias.data(), N, C);
    cpu::gelu_forward(out1.data(), pre1.data(), N * C);
    std::vector<float> pre2 = pre0, out2(size_t(N * C), -1.0f);  // (N, C) fused
    cpu::bias_gelu_forward(out2.data(), pre2.data(), bias.data(), N, C);
    for (int64_t i = 0; i < N * C; i++) {
      ASSERT_EQ(std::bit_cast<uint32_t>(pre2[i]), std::bit_cast<uint32_t>(pre1[i])) << C << " " << i;
      ASSERT_EQ(std::bit_cast<uint32_t>(out2[i]), std::bit_cast<uint32_t>(out1[i])) << C << " " << i;
    }
  }
}

}  // namespace

// RMSNorm against a double reference and central differences, its 16-bit
// outputs against the fp32 kernel's, and its thread-count independence.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"
#include "tessera/kernels/cpu/cast.h"
#include "tessera/kernels/cpu/rmsnorm.h"

using namespace tessera;

namespace {

constexpr float kEps = 1e-5f;

// out (N, C) in double.
std::vector<double> ref_forward(const std::vector<double>& x, const std::vector<double>& w,
                                int64_t N, int64_t C, double eps) {
  std::vector<double> out(N * C);
  for (int64_t n = 0; n < N; n++) {
    double ss = 0;
    for (int64_t c = 0; c < C; c++) ss += x[n * C + c] * x[n * C + c];
    const double r = 1.0 / std::sqrt(ss / double(C) + eps);
    for (int64_t c = 0; c < C; c++) out[n * C + c] = x[n * C + c] * r * w[c];
  }
  return out;
}

TEST(RMSNorm, ForwardMatchesReference) {
  const int64_t N = 13, C = 100;
  // Offset rows: unlike LayerNorm the mean is not removed, so it shows in rstd.
  auto x = test::randn(N * C, 1, 0.5f);
  for (auto& e : x) e += 3.0f;
  const auto w = test::randn(C, 2);
  std::vector<float> out(N * C), rstd(N);
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, kEps);
  const auto want = ref_forward(test::to_double(x), test::to_double(w), N, C, kEps);
  EXPECT_LT(test::max_err_vs_scale(out, want), 1e-6);
  EXPECT_NEAR(rstd[0], 1.0 / std::sqrt(9.25), 0.02);  // E[x^2] = 3^2 + 0.5^2
}

// A larger epsilon dominates a tiny row: eps is the argument, not a constant.
TEST(RMSNorm, EpsilonIsTheArgument) {
  const int64_t N = 1, C = 8;
  const std::vector<float> x(C, 1e-3f), w(C, 1.0f);
  std::vector<float> out(C), rstd(N);
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-2f);
  EXPECT_NEAR(rstd[0], 1.0 / std::sqrt(1e-6 + 1e-2), 1e-4);
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-6f);
  EXPECT_NEAR(rstd[0], 1.0 / std::sqrt(2e-6), 1.0);
  EXPECT_NEAR(out[0], 1e-3 / std::sqrt(2e-6), 1e-3);
}

// Analytic gradients of L = sum(out * R) against central differences of the
// double reference.
TEST(RMSNorm, BackwardMatchesFiniteDifferences) {
  const int64_t N = 5, C = 37;  // C not a multiple of the simd width or the 64-column chunk
  const auto x = test::randn(N * C, 4), w = test::randn(C, 5);
  const auto R = test::randn(N * C, 7);
  std::vector<float> out(N * C), rstd(N);
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, kEps);
  // Accumulate semantics: start the gradients from known values.
  std::vector<float> dx(N * C, 0.5f), dw(C, -1.0f);
  cpu::rmsnorm_backward(dx.data(), dw.data(), R.data(), x.data(), w.data(), rstd.data(), N, C);

  const auto xd = test::to_double(x), wd = test::to_double(w), Rd = test::to_double(R);
  auto loss_x = [&](const std::vector<double>& xv) {
    const auto o = ref_forward(xv, wd, N, C, kEps);
    double l = 0;
    for (size_t i = 0; i < o.size(); i++) l += o[i] * Rd[i];
    return l;
  };
  auto loss_w = [&](const std::vector<double>& wv) {
    const auto o = ref_forward(xd, wv, N, C, kEps);
    double l = 0;
    for (size_t i = 0; i < o.size(); i++) l += o[i] * Rd[i];
    return l;
  };
  auto gx = test::central_differences(loss_x, xd, 1e-6);
  auto gw = test::central_differences(loss_w, wd, 1e-6);
  for (auto& g : gx) g += 0.5;
  for (auto& g : gw) g -= 1.0;
  EXPECT_LT(test::max_err_vs_scale(dx, gx), 1e-5) << "dinp";
  EXPECT_LT(test::max_err_vs_scale(dw, gw), 1e-5) << "dweight";
}

// dweight sums over rows in a fixed order, whatever the thread count.
TEST(RMSNorm, BackwardSameBitsWithOneOrTwoThreads) {
  const int64_t N = 300, C = 200;
  const auto x = test::randn(N * C, 8), w = test::randn(C, 9), R = test::randn(N * C, 11);
  std::vector<float> out(N * C), rstd(N);
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, kEps);
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<float> g(N * C + C, 0.0f);  // [dinp (N, C) | dweight (C)]
    cpu::rmsnorm_backward(g.data(), g.data() + N * C, R.data(), x.data(), w.data(), rstd.data(),
                          N, C);
    return g;
  };
  const int saved = omp_get_max_threads();
  const auto a = run(1), b = run(2);
  omp_set_num_threads(saved);
  EXPECT_EQ(a, b);
}

// The 16-bit outputs are the fp32 kernel's rounded once; rstd is the same.
TEST(RMSNorm, SixteenBitOutputIsTheFp32OutputRounded) {
  const int64_t N = 17, C = 96;
  const auto x = test::randn(N * C, 12), w = test::randn(C, 13);
  std::vector<float> out(N * C), rstd(N), rstd16(N);
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, kEps);
  std::vector<bf16_t> ob(N * C);
  std::vector<fp16_t> oh(N * C);
  cpu::rmsnorm_forward_bf16(ob.data(), rstd16.data(), x.data(), w.data(), N, C, kEps);
  EXPECT_EQ(rstd16, rstd);
  cpu::rmsnorm_forward_fp16(oh.data(), rstd16.data(), x.data(), w.data(), N, C, kEps);
  EXPECT_EQ(rstd16, rstd);
  int64_t bad_b = 0, bad_h = 0;
  double worst_b = 0;
  for (int64_t i = 0; i < N * C; i++) {
    bad_b += ob[i] != cpu::fp32_to_bf16(out[i]);
    bad_h += oh[i] != cpu::fp32_to_fp16(out[i]);
    worst_b = std::max(worst_b, double(std::abs(cpu::bf16_to_fp32(ob[i]) - out[i])) /
                                    (1e-3 + std::abs(out[i])));
  }
  EXPECT_EQ(bad_b, 0);
  EXPECT_EQ(bad_h, 0);
  EXPECT_LT(worst_b, 1.0 / 256);  // bf16: 8 significant bits
}

}  // namespace

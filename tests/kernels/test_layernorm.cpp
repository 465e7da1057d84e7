// LayerNorm against a double reference and central differences.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"
#include "tessera/kernels/cpu/layernorm.h"

using namespace tessera;

namespace {

// out (N, C) in double.
std::vector<double> ref_forward(const std::vector<double>& x, const std::vector<double>& w,
                                const std::vector<double>& b, int64_t N, int64_t C) {
  std::vector<double> out(N * C);
  for (int64_t n = 0; n < N; n++) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < C; c++) m += x[n * C + c];
    m /= double(C);
    for (int64_t c = 0; c < C; c++) v += (x[n * C + c] - m) * (x[n * C + c] - m);
    const double r = 1.0 / std::sqrt(v / double(C) + double(cpu::kLayerNormEps));
    for (int64_t c = 0; c < C; c++) out[n * C + c] = (x[n * C + c] - m) * r * w[c] + b[c];
  }
  return out;
}

TEST(LayerNorm, ForwardMatchesReference) {
  const int64_t N = 13, C = 100;
  // Offset rows (mean 3, std 0.5): a single-pass variance would lose digits here.
  auto x = test::randn(N * C, 1, 0.5f);
  for (auto& e : x) e += 3.0f;
  const auto w = test::randn(C, 2), b = test::randn(C, 3);
  std::vector<float> out(N * C), mean(N), rstd(N);
  cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  const auto want = ref_forward(test::to_double(x), test::to_double(w), test::to_double(b), N, C);
  EXPECT_LT(test::max_err_vs_scale(out, want), 1e-5);
  EXPECT_NEAR(mean[0], 3.0f, 0.2f);
  EXPECT_NEAR(rstd[0], 2.0f, 0.4f);
}

// Analytic gradients of L = sum(out * R) against central differences of the
// double reference (eps 1e-6: truncation ~1e-12, rounding ~1e-10).
TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  const int64_t N = 5, C = 37;  // C not a multiple of the simd width or the 64-column chunk
  const auto x = test::randn(N * C, 4), w = test::randn(C, 5), b = test::randn(C, 6);
  const auto R = test::randn(N * C, 7);
  std::vector<float> out(N * C), mean(N), rstd(N);
  cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  // Accumulate semantics: start the gradients from known values.
  std::vector<float> dx(N * C, 0.5f), dw(C, -1.0f), db(C, 2.0f);
  cpu::layernorm_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(),
                          mean.data(), rstd.data(), N, C);

  auto xd = test::to_double(x), wd = test::to_double(w), bd = test::to_double(b);
  const auto Rd = test::to_double(R);
  auto loss = [&] {
    const auto o = ref_forward(xd, wd, bd, N, C);
    double l = 0;
    for (size_t i = 0; i < o.size(); i++) l += o[i] * Rd[i];
    return l;
  };
  auto numeric = [&](std::vector<double>& p, double offset) {
    std::vector<double> g(p.size());
    for (size_t i = 0; i < p.size(); i++) {
      const double v = p[i], eps = 1e-6;
      p[i] = v + eps;
      const double lp = loss();
      p[i] = v - eps;
      const double lm = loss();
      p[i] = v;
      g[i] = (lp - lm) / (2 * eps) + offset;
    }
    return g;
  };
  EXPECT_LT(test::max_err_vs_scale(dx, numeric(xd, 0.5)), 1e-4) << "dinp";
  EXPECT_LT(test::max_err_vs_scale(dw, numeric(wd, -1.0)), 1e-4) << "dweight";
  EXPECT_LT(test::max_err_vs_scale(db, numeric(bd, 2.0)), 1e-4) << "dbias";
}

// dweight/dbias sum over rows in a fixed order, whatever the thread count.
TEST(LayerNorm, BackwardSameBitsWithOneOrTwoThreads) {
  const int64_t N = 300, C = 200;
  const auto x = test::randn(N * C, 8), w = test::randn(C, 9), b = test::randn(C, 10);
  const auto R = test::randn(N * C, 11);
  std::vector<float> out(N * C), mean(N), rstd(N);
  cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<float> g(N * C + 2 * C, 0.0f);  // [dinp (N, C) | dweight (C) | dbias (C)]
    cpu::layernorm_backward(g.data(), g.data() + N * C, g.data() + N * C + C, R.data(), x.data(),
                            w.data(), mean.data(), rstd.data(), N, C);
    return g;
  };
  const int saved = omp_get_max_threads();
  const auto a = run(1), b2 = run(2);
  omp_set_num_threads(saved);
  EXPECT_EQ(a, b2);
}

}  // namespace

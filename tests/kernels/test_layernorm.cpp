// LayerNorm against a double reference and central differences.
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernel_test_util.h"
#include "tessera/kernels/cpu/elementwise.h"
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

// The residual add fused into the norm gives the bits of the add followed by
// the norm: the sum, the output in each storage, mean and rstd, on GPT-2
// 124M's rows (256 x 768, threaded) and on odd widths that take the loops'
// remainders.
TEST(LayerNorm, ResidualFusedEqualsAddThenNorm) {
  const int64_t shapes[][2] = {{256, 768}, {7, 37}, {33, 1000}};
  for (const auto& sh : shapes) {
    const int64_t N = sh[0], C = sh[1];
    const std::vector<float> res0 = test::randn(N * C, 1), addend = test::randn(N * C, 2, 0.5f),
                             w = test::randn(C, 3), b = test::randn(C, 4);  // (N, C), (C)
    // Unfused: res = res + addend (elementwise.h), then the norm.
    std::vector<float> r1 = res0, out1(N * C), m1(N), s1(N);  // (N, C), (N)
    cpu::add(r1.data(), r1.data(), addend.data(), N * C);
    cpu::layernorm_forward(out1.data(), m1.data(), s1.data(), r1.data(), w.data(), b.data(), N, C);
    std::vector<uint16_t> ob1(N * C), oh1(N * C);  // (N, C) 16-bit outputs
    std::vector<float> mb(N), sb(N);
    cpu::layernorm_forward_bf16(ob1.data(), mb.data(), sb.data(), r1.data(), w.data(), b.data(), N,
                                C);
    cpu::layernorm_forward_fp16(oh1.data(), mb.data(), sb.data(), r1.data(), w.data(), b.data(), N,
                                C);
    // Fused, once per storage (each from the same starting residual).
    std::vector<float> r2 = res0, out2(N * C), m2(N), s2(N);
    cpu::residual_layernorm_forward(out2.data(), m2.data(), s2.data(), r2.data(), addend.data(),
                                    w.data(), b.data(), N, C);
    std::vector<float> r3 = res0, r4 = res0, m3(N), s3(N);
    std::vector<uint16_t> ob2(N * C), oh2(N * C);
    cpu::residual_layernorm_forward_bf16(ob2.data(), m3.data(), s3.data(), r3.data(),
                                         addend.data(), w.data(), b.data(), N, C);
    cpu::residual_layernorm_forward_fp16(oh2.data(), m3.data(), s3.data(), r4.data(),
                                         addend.data(), w.data(), b.data(), N, C);
    for (int64_t i = 0; i < N * C; i++) {
      ASSERT_EQ(std::bit_cast<uint32_t>(r2[i]), std::bit_cast<uint32_t>(r1[i])) << C << " " << i;
      ASSERT_EQ(std::bit_cast<uint32_t>(r3[i]), std::bit_cast<uint32_t>(r1[i])) << C << " " << i;
      ASSERT_EQ(std::bit_cast<uint32_t>(out2[i]), std::bit_cast<uint32_t>(out1[i])) << C << " " << i;
      ASSERT_EQ(ob2[i], ob1[i]) << C << " " << i;
      ASSERT_EQ(oh2[i], oh1[i]) << C << " " << i;
    }
    for (int64_t n = 0; n < N; n++) {
      ASSERT_EQ(std::bit_cast<uint32_t>(m2[n]), std::bit_cast<uint32_t>(m1[n])) << n;
      ASSERT_EQ(std::bit_cast<uint32_t>(s2[n]), std::bit_cast<uint32_t>(s1[n])) << n;
      ASSERT_EQ(std::bit_cast<uint32_t>(m3[n]), std::bit_cast<uint32_t>(m1[n])) << n;
    }
  }
}

}  // namespace

// SwiGLU (fused [gate | up] rows) against a double reference and central
// differences, and its 16-bit storage against the fp32 kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"
#include "tessera/kernels/cpu/cast.h"
#include "tessera/kernels/cpu/swiglu.h"

using namespace tessera;

namespace {

double silu(double g) { return g / (1.0 + std::exp(-g)); }

// out (N, F) in double from inp (N, 2F).
std::vector<double> ref_forward(const std::vector<double>& inp, int64_t N, int64_t F) {
  std::vector<double> out(N * F);
  for (int64_t n = 0; n < N; n++)
    for (int64_t f = 0; f < F; f++)
      out[n * F + f] = silu(inp[n * 2 * F + f]) * inp[n * 2 * F + F + f];
  return out;
}

// Rows spanning the saturated tails and the origin; large enough (N F > 2^14)
// to take the threaded path, F not a multiple of 16.
std::vector<float> inputs(int64_t N, int64_t F) {
  auto x = test::randn(N * 2 * F, 1, 3.0f);
  x[0] = 0.0f, x[1] = -30.0f, x[2] = 30.0f, x[3] = 1e-4f;  // gates of row 0
  return x;
}

TEST(SwiGLU, ForwardMatchesReference) {
  const int64_t N = 300, F = 77;
  const auto x = inputs(N, F);
  std::vector<float> out(N * F);
  cpu::swiglu_forward(out.data(), x.data(), N, F);
  const auto want = ref_forward(test::to_double(x), N, F);
  EXPECT_LT(test::max_rel_err(out, want, 1.0), 1e-6);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], 0.0f, 1e-9f);
  EXPECT_FLOAT_EQ(out[2], 30.0f * x[F + 2]);
}

// The gate and up gradients against central differences of the double
// reference of L = sum(out * R), and written (not accumulated).
TEST(SwiGLU, BackwardMatchesFiniteDifferences) {
  const int64_t N = 7, F = 19;
  const auto x = inputs(N, F);
  const auto R = test::randn(N * F, 2);
  std::vector<float> dx(N * 2 * F, 123.0f);  // garbage: must be overwritten
  cpu::swiglu_backward(dx.data(), x.data(), R.data(), N, F);
  const auto Rd = test::to_double(R);
  auto loss = [&](const std::vector<double>& xv) {
    const auto o = ref_forward(xv, N, F);
    double l = 0;
    for (size_t i = 0; i < o.size(); i++) l += o[i] * Rd[i];
    return l;
  };
  const auto num = test::central_differences(loss, test::to_double(x), 1e-6);
  EXPECT_LT(test::max_rel_err(dx, num, 1.0), 1e-5);
}

// 16 bits: the kernel widens the 16-bit inputs and rounds each result once,
// so it equals the fp32 kernel run on the widened inputs, rounded.
template <class T, class ToF, class FromF, class Fwd, class Bwd>
void check_lowp(ToF to_f32, FromF from_f32, Fwd fwd16, Bwd bwd16) {
  const int64_t N = 150, F = 130;
  const auto x = inputs(N, F);
  const auto R = test::randn(N * F, 3);
  std::vector<T> x16(x.size());
  std::vector<float> xw(x.size());  // the 16-bit inputs widened
  for (size_t i = 0; i < x.size(); i++) x16[i] = from_f32(x[i]), xw[i] = to_f32(x16[i]);
  std::vector<float> out(N * F), dx(N * 2 * F);
  cpu::swiglu_forward(out.data(), xw.data(), N, F);
  cpu::swiglu_backward(dx.data(), xw.data(), R.data(), N, F);
  std::vector<T> out16(N * F), dx16(N * 2 * F);
  fwd16(out16.data(), x16.data(), N, F);
  bwd16(dx16.data(), x16.data(), R.data(), N, F);
  int64_t bad = 0;
  for (int64_t i = 0; i < N * F; i++) bad += out16[i] != from_f32(out[i]);
  for (int64_t i = 0; i < N * 2 * F; i++) bad += dx16[i] != from_f32(dx[i]);
  EXPECT_EQ(bad, 0);
  // And close to the fp32 result on the unrounded inputs.
  std::vector<float> out_exact(N * F), ow(N * F);
  cpu::swiglu_forward(out_exact.data(), x.data(), N, F);
  for (int64_t i = 0; i < N * F; i++) ow[i] = to_f32(out16[i]);
  EXPECT_LT(test::max_err_vs_scale(ow, out_exact), 2e-2);
}

TEST(SwiGLU, Bf16IsTheFp32KernelRounded) {
  check_lowp<bf16_t>(cpu::bf16_to_fp32, cpu::fp32_to_bf16, cpu::swiglu_forward_bf16,
                     cpu::swiglu_backward_bf16);
}
TEST(SwiGLU, Fp16IsTheFp32KernelRounded) {
  check_lowp<fp16_t>(cpu::fp16_to_fp32, cpu::fp32_to_fp16, cpu::swiglu_forward_fp16,
                     cpu::swiglu_backward_fp16);
}

}  // namespace

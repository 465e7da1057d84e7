// The bf16 / fp16 linear-layer GEMMs against an fp64 reference computed from
// the same 16-bit-rounded inputs, so the only error left is the kernel's own
// fp32 accumulation.
//
// Tolerance: a product of two bf16 (8-bit significand) or fp16 (11-bit)
// values is exact in fp32 (16 or 22 bits <= 24), so each output is a sum of
// K exact terms accumulated in fp32. Recursive fp32 summation of K terms errs
// by at most about K * 2^-24 * sum|term| (Higham, 3.1); we allow K * 2^-23
// (twice that) per element, measured against sum|a*b| (+ |prior value| for
// +=). A kernel that rounded its accumulator to bf16 would be off by ~2^-9
// relative per step, far outside this bound for the shapes used.
// The bf16-output forward may additionally differ by one final rounding:
// half a bf16 ulp of the result (2^-9 relative), one ulp allowed (2^-8).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "kernel_test_util.h"
#include "tessera/core/error.h"
#include "tessera/kernels/cpu/cast.h"
#include "tessera/kernels/cpu/matmul.h"
#include "tessera/kernels/cpu/matmul_lowp.h"

using namespace tessera;
using namespace tessera::cpu;

namespace {

// One 16-bit format and its kernels.
struct Lowp {
  const char* name;
  uint16_t (*narrow)(float);
  float (*widen)(uint16_t);
  decltype(&matmul_forward_bf16) forward;
  decltype(&matmul_forward_bf16_out) forward_out;
  decltype(&matmul_backward_bf16) backward;
};
const Lowp kBf16{"bf16", fp32_to_bf16, bf16_to_fp32, matmul_forward_bf16,
                 matmul_forward_bf16_out, matmul_backward_bf16};
const Lowp kFp16{"fp16", fp32_to_fp16, fp16_to_fp32, matmul_forward_fp16,
                 matmul_forward_fp16_out, matmul_backward_fp16};

struct Shape { int64_t N, C, OC; };
// Odd sizes (no SIMD-friendly multiple), one GPT-2 small-like shape, and
// shapes that take the split backward paths of matmul_lowp.cpp: OC 2304
// (dweight in two row blocks), OC 4500 (three blocks, the last shorter),
// OC 9001 (dinp summed over K blocks of 4096, the last one short).
const Shape kShapes[] = {{37, 50, 29}, {64, 768, 96}, {8, 96, 2304}, {5, 33, 4500},
                         {6, 40, 9001}};

// A random (rows, cols) matrix rounded to the format: bits and their fp32 values.
struct Matrix16 {
  std::vector<uint16_t> bits;  // (rows, cols)
  std::vector<float> value;    // (rows, cols) widened bits, exact
};
Matrix16 random16(const Lowp& f, int64_t n, uint64_t seed) {
  Matrix16 m{std::vector<uint16_t>(n), test::randn(n, seed)};
  for (int64_t i = 0; i < n; i++) {
    m.bits[i] = f.narrow(m.value[i]);
    m.value[i] = f.widen(m.bits[i]);
  }
  return m;
}

// |got - want| <= tol * scale at every element; scale is the sum of |terms|.
void expect_within(const std::vector<float>& got, const std::vector<double>& want,
                   const std::vector<double>& scale, double tol, const char* what) {
  for (size_t i = 0; i < want.size(); i++)
    ASSERT_LE(std::abs(double(got[i]) - want[i]), tol * scale[i] + 1e-30)
        << what << " at " << i << ": got " << got[i] << " want " << want[i];
}

void check_forward(const Lowp& f, Shape s) {
  const auto [N, C, OC] = s;
  const Matrix16 inp = random16(f, N * C, 1), w = random16(f, OC * C, 2);  // (N, C), (OC, C)
  const std::vector<float> bias = test::randn(OC, 3);                       // (OC)
  std::vector<double> want(N * OC), scale(N * OC);                          // (N, OC)
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < OC; o++) {
      double acc = bias[o], mag = std::abs(bias[o]);
      for (int64_t c = 0; c < C; c++) {
        const double p = double(inp.value[n * C + c]) * w.value[o * C + c];
        acc += p, mag += std::abs(p);
      }
      want[n * OC + o] = acc, scale[n * OC + o] = mag;
    }
  const double tol = double(C + 1) * 0x1p-23;
  std::vector<float> out(N * OC);  // (N, OC)
  f.forward(out.data(), inp.bits.data(), w.bits.data(), bias.data(), N, C, OC);
  expect_within(out, want, scale, tol, "forward");

  std::vector<uint16_t> out16(N * OC);  // (N, OC) in the format
  f.forward_out(out16.data(), inp.bits.data(), w.bits.data(), bias.data(), N, C, OC);
  std::vector<float> widened(N * OC);
  std::vector<double> scale16(N * OC);
  for (int64_t i = 0; i < N * OC; i++) {
    widened[i] = f.widen(out16[i]);
    scale16[i] = scale[i] * tol / 0x1p-8 + std::abs(want[i]);  // accumulation + one ulp
  }
  expect_within(widened, want, scale16, 0x1p-8, "forward_out");
}

// accumulate_dweight false: dweight is written, so its prior values (NaN
// here) must not be read (the step's first backward; the split and unsplit
// dweight paths both).
void check_backward(const Lowp& f, Shape s, bool accumulate_dinp, bool accumulate_dweight = true) {
  const auto [N, C, OC] = s;
  const Matrix16 dout = random16(f, N * OC, 4), inp = random16(f, N * C, 5),
                 w = random16(f, OC * C, 6);  // (N, OC), (N, C), (OC, C)
  std::vector<float> dinp = test::randn(N * C, 7), dw = test::randn(OC * C, 8),
                     db = test::randn(OC, 9);  // (N, C), (OC, C), (OC): prior values
  if (!accumulate_dweight) std::fill(dw.begin(), dw.end(), std::numeric_limits<float>::quiet_NaN());
  std::vector<double> want_dinp(N * C), mag_dinp(N * C), want_dw(OC * C), mag_dw(OC * C),
      want_db(OC), mag_db(OC);
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) {
      double acc = accumulate_dinp ? dinp[n * C + c] : 0.0, mag = std::abs(acc);
      for (int64_t o = 0; o < OC; o++) {
        const double p = double(dout.value[n * OC + o]) * w.value[o * C + c];
        acc += p, mag += std::abs(p);
      }
      want_dinp[n * C + c] = acc, mag_dinp[n * C + c] = mag;
    }
  for (int64_t o = 0; o < OC; o++) {
    for (int64_t c = 0; c < C; c++) {
      double acc = accumulate_dweight ? dw[o * C + c] : 0.0, mag = std::abs(acc);
      for (int64_t n = 0; n < N; n++) {
        const double p = double(dout.value[n * OC + o]) * inp.value[n * C + c];
        acc += p, mag += std::abs(p);
      }
      want_dw[o * C + c] = acc, mag_dw[o * C + c] = mag;
    }
    double acc = db[o], mag = std::abs(acc);
    for (int64_t n = 0; n < N; n++) acc += dout.value[n * OC + o], mag += std::abs(dout.value[n * OC + o]);
    want_db[o] = acc, mag_db[o] = mag;
  }
  f.backward(dinp.data(), dw.data(), db.data(), dout.bits.data(), inp.bits.data(), w.bits.data(),
             N, C, OC, accumulate_dinp, accumulate_dweight);
  expect_within(dinp, want_dinp, mag_dinp, double(OC + 1) * 0x1p-23, "dinp");
  expect_within(dw, want_dw, mag_dw, double(N + 1) * 0x1p-23, "dweight");
  expect_within(db, want_db, mag_db, double(N + 1) * 0x1p-23, "dbias");
}

}  // namespace

TEST(MatmulLowp, Bf16ForwardMatchesFp64Reference) {
  for (Shape s : kShapes) check_forward(kBf16, s);
}
TEST(MatmulLowp, Bf16BackwardMatchesFp64Reference) {
  for (Shape s : kShapes) check_backward(kBf16, s, false), check_backward(kBf16, s, true);
}
TEST(MatmulLowp, Bf16BackwardWritesDweightWithoutReadingIt) {
  for (Shape s : kShapes) check_backward(kBf16, s, false, false);
}
TEST(MatmulLowp, Fp16BackwardWritesDweightWithoutReadingIt) {
  for (Shape s : kShapes) check_backward(kFp16, s, true, false);
}

// The trainer writes dweight on the step's first backward where it used to
// add to the zeros the optimizer left: the same bits (fp32 GEMM and bf16),
// so the fp32 reference run is unchanged. Shapes take the split and the
// whole-GEMM dweight paths.
TEST(MatmulLowp, WritingDweightEqualsAddingToZeros) {
  for (const Shape s : kShapes) {
    const auto [N, C, OC] = s;
    const Matrix16 dout = random16(kBf16, N * OC, 4), inp = random16(kBf16, N * C, 5),
                   w = random16(kBf16, OC * C, 6);  // (N, OC), (N, C), (OC, C)
    std::vector<float> added(OC * C, 0.0f), written(OC * C, std::numeric_limits<float>::quiet_NaN());
    matmul_backward(nullptr, added.data(), nullptr, dout.value.data(), inp.value.data(),
                    w.value.data(), N, C, OC, false, true);
    matmul_backward(nullptr, written.data(), nullptr, dout.value.data(), inp.value.data(),
                    w.value.data(), N, C, OC, false, false);
    EXPECT_EQ(written, added) << "fp32 " << N << "x" << C << "x" << OC;
    std::fill(added.begin(), added.end(), 0.0f);
    std::fill(written.begin(), written.end(), std::numeric_limits<float>::quiet_NaN());
    matmul_backward_bf16(nullptr, added.data(), nullptr, dout.bits.data(), inp.bits.data(),
                         w.bits.data(), N, C, OC, false, true);
    matmul_backward_bf16(nullptr, written.data(), nullptr, dout.bits.data(), inp.bits.data(),
                         w.bits.data(), N, C, OC, false, false);
    EXPECT_EQ(written, added) << "bf16 " << N << "x" << C << "x" << OC;
  }
}
TEST(MatmulLowp, Fp16ForwardMatchesFp64Reference) {
  std::printf("fp16 path: %s\n", lowp_gemm_path_description(Precision::Fp16).c_str());
  for (Shape s : kShapes) check_forward(kFp16, s);
}
TEST(MatmulLowp, Fp16BackwardMatchesFp64Reference) {
  for (Shape s : kShapes) check_backward(kFp16, s, false), check_backward(kFp16, s, true);
}

// dinp null (the first layer's input needs no gradient), no bias. The
// cached primitive gives the same bits on a second call from the same start,
// and a second call into the same dweight adds (to rounding) as much again.
TEST(MatmulLowp, Bf16OptionalOutputsAndCachedPrimitive) {
  const int64_t N = 16, C = 40, OC = 24;
  const Matrix16 dout = random16(kBf16, N * OC, 10), inp = random16(kBf16, N * C, 11),
                 w = random16(kBf16, OC * C, 12);
  std::vector<float> first(OC * C, 0.0f), again(OC * C, 0.0f), twice(OC * C, 0.0f);  // (OC, C)
  auto dweight_into = [&](std::vector<float>& dw) {
    matmul_backward_bf16(nullptr, dw.data(), nullptr, dout.bits.data(), inp.bits.data(),
                         w.bits.data(), N, C, OC, false);
  };
  dweight_into(first), dweight_into(again), dweight_into(twice), dweight_into(twice);
  for (int64_t i = 0; i < OC * C; i++) ASSERT_EQ(again[i], first[i]) << i;
  std::vector<double> doubled(OC * C);
  for (int64_t i = 0; i < OC * C; i++) doubled[i] = 2.0 * first[i];
  EXPECT_LT(test::max_err_vs_scale(twice, doubled), 1e-6);
}

// oneDNN's kernel where the path is oneDNN's; none otherwise (an AVX2-only
// CPU has no bf16 matmul in oneDNN 2.6, and the GEMMs run widened to fp32).
TEST(MatmulLowp, ReportsImplementation) {
  const std::string impl = bf16_gemm_impl(256, 768, 2304);
  std::printf("bf16: %s; implementation: %s\n", lowp_gemm_path_description(Precision::Bf16).c_str(),
              impl.c_str());
  if (lowp_gemm_path(Precision::Bf16) == LowpGemmPath::OneDnn) {
    EXPECT_FALSE(impl.empty());
    EXPECT_NE(impl.rfind("ref", 0), 0u) << impl;
  }
  for (Precision t : {Precision::Bf16, Precision::Fp16}) {
    const std::string d = lowp_gemm_path_description(t);
    EXPECT_NE(d.find(t == Precision::Bf16 ? "bf16" : "fp16"), std::string::npos) << d;
    EXPECT_NE(d.find(lowp_gemm_path(t) == LowpGemmPath::OneDnn ? "oneDNN's" : "computed in fp32"),
              std::string::npos) << d;
  }
  EXPECT_THROW(lowp_gemm_path(Precision::Fp32), Error);
}

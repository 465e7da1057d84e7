#include "tessera/kernels/cpu/matmul_lowp.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "tessera/core/error.h"
#include "tessera/kernels/cpu/cast.h"
#include "tessera/kernels/cpu/matmul.h"
#include "tessera/kernels/cpu/matmul_lowp_primitive.h"

namespace tessera::cpu {

namespace {

// out (N, OC) = inp (N, C) @ weight (OC, C)^T [+ bias]: weight read as (C, OC) transposed.
void forward_lowp(Precision in, Precision out_type, void* out, const uint16_t* inp, const uint16_t* weight,
                  const float* bias, int64_t N, int64_t C, int64_t OC) {
  const GemmSpec s{.in = in, .out = out_type, .M = N, .N = OC, .K = C,
                   .b_trans = true, .bias = bias != nullptr};
  gemm_lowp(s, inp, weight, bias, out);
}

// dbias (OC) += column sums of dout (N, OC) in fp32. Threads own disjoint
// column blocks and each column is summed in row order: deterministic.
template <float (*widen)(uint16_t)>
void bias_backward_lowp(float* dbias, const uint16_t* dout, int64_t N, int64_t OC) {
  constexpr int64_t kBlock = 64;
#pragma omp parallel for schedule(static) if (N * OC > (1 << 15))
  for (int64_t c0 = 0; c0 < OC; c0 += kBlock) {
    const int64_t c1 = c0 + kBlock < OC ? c0 + kBlock : OC;
    float acc[kBlock] = {};  // (kBlock) this block's column sums
    for (int64_t n = 0; n < N; n++) {
      const uint16_t* row = dout + n * OC;  // (OC)
#pragma omp simd
      for (int64_t c = c0; c < c1; c++) acc[c - c0] += widen(row[c]);
    }
    for (int64_t c = c0; c < c1; c++) dbias[c] += acc[c - c0];
  }
}

// How the backward GEMMs are split (measured at GPT-2 124M's shapes, 256
// rows, docs/mixed_precision.md "GEMM throughput"):
//
// - dweight (OC, C) += dout^T @ inp has K = N (the micro-batch's rows, 256):
//   a short K, so reading and writing the fp32 dweight is a large part of
//   the work. oneDNN 2.6's brgemm with the sum post-op runs it at ~230
//   GFLOP/s per core; its gemm-based matmul (beta = 1) at ~270-290, and ~270
//   against ~190 for the tied LM head (50257 x 768). oneDNN picks brgemm for
//   a dense transposed A, so dweight is computed in blocks of rows (each
//   block's A is a strided slice of dout, which brgemm declines): at least
//   two blocks, at most kDweightRows rows each.
// - dinp (N, C) = dout @ weight has K = OC: brgemm is fastest for the
//   block's linears, but for the LM head (K = 50257) it re-reads the 25 MB
//   dout once per column block; summing K blocks of kDinpK into dinp (which
//   stays in cache) with the gemm-based matmul is ~15 % faster.
//
// Either split falls back to one whole GEMM when oneDNN offers only its
// reference kernel for the block (e.g. f16 on some CPUs).
constexpr int64_t kDweightRows = 2048;
constexpr int64_t kDweightMinRows = 64;  // below this, one brgemm call
constexpr int64_t kDinpK = 4096;
constexpr int64_t kDinpMinK = 2 * kDinpK;  // below this, one brgemm call

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Whether oneDNN has a real (non-reference) kernel for s.
bool fast_impl(const GemmSpec& s) {
  const std::string impl = gemm_lowp_impl(s);
  return !impl.empty() && impl.rfind("ref", 0) != 0;
}

// dweight (OC, C) += (or =) dout^T (OC, N) @ inp (N, C), dout (N, OC) read transposed.
void dweight_lowp(Precision in, float* dweight, const uint16_t* dout, const uint16_t* inp, int64_t N,
                  int64_t C, int64_t OC, bool accumulate) {
  const GemmSpec whole{.in = in, .out = Precision::Fp32, .M = OC, .N = C, .K = N, .a_trans = true,
                       .accumulate = accumulate};
  const int64_t blocks = std::max<int64_t>(2, ceil_div(OC, kDweightRows));
  const int64_t rows = ceil_div(ceil_div(OC, blocks), 16) * 16;  // (rows) per block, SIMD-aligned
  GemmSpec block = whole;
  block.M = rows, block.lda = OC;
  if (OC < kDweightMinRows || rows >= OC || !fast_impl(block)) {
    gemm_lowp(whole, dout, inp, nullptr, dweight);
    return;
  }
  for (int64_t r0 = 0; r0 < OC; r0 += rows) {
    GemmSpec s = block;
    s.M = std::min(rows, OC - r0);  // the last block may be shorter (its own primitive)
    // dout columns r0.. (row stride OC), dweight rows r0..
    gemm_lowp(s, dout + r0, inp, nullptr, dweight + r0 * C);
  }
}

// dinp (N, C) = or += dout (N, OC) @ weight (OC, C).
void dinp_lowp(Precision in, float* dinp, const uint16_t* dout, const uint16_t* weight, int64_t N,
               int64_t C, int64_t OC, bool accumulate) {
  const GemmSpec whole{.in = in, .out = Precision::Fp32, .M = N, .N = C, .K = OC,
                       .accumulate = accumulate};
  GemmSpec block = whole;
  block.K = kDinpK, block.lda = OC;
  if (OC < kDinpMinK || !fast_impl(block)) {
    gemm_lowp(whole, dout, weight, nullptr, dinp);
    return;
  }
  for (int64_t k0 = 0; k0 < OC; k0 += kDinpK) {
    GemmSpec s = block;
    s.K = std::min(kDinpK, OC - k0);
    s.accumulate = accumulate || k0 > 0;  // the first block writes or adds as asked
    // dout columns k0.. (row stride OC), weight rows k0..
    gemm_lowp(s, dout + k0, weight + k0 * C, nullptr, dinp);
  }
}

template <float (*widen)(uint16_t)>
void backward_lowp(Precision in, float* dinp, float* dweight, float* dbias, const uint16_t* dout,
                   const uint16_t* inp, const uint16_t* weight, int64_t N, int64_t C, int64_t OC,
                   bool accumulate_dinp, bool accumulate_dweight) {
  if (dinp) dinp_lowp(in, dinp, dout, weight, N, C, OC, accumulate_dinp);
  if (dweight) dweight_lowp(in, dweight, dout, inp, N, C, OC, accumulate_dweight);
  if (dbias) bias_backward_lowp<widen>(dbias, dout, N, OC);
}

// The fp32-compute path widens 16-bit operands into these per-thread
// scratch buffers (grown to the largest layer, then reused). Widening is
// exact, and a product of two bf16 or fp16 values is exact in fp32, so the
// fp32 sgemm accumulates the same products as a 16-bit kernel would (in its
// own order).
const float* widen(Precision in, const uint16_t* x, int64_t n, std::vector<float>& scratch) {
  if (int64_t(scratch.size()) < n) scratch.resize(size_t(n));
  if (in == Precision::Bf16) cast_bf16_to_fp32(scratch.data(), x, n);
  else cast_fp16_to_fp32(scratch.data(), x, n);
  return scratch.data();
}
thread_local std::vector<float> t_inp, t_weight, t_dout, t_out;

// Whether oneDNN has a real (non-reference) matmul for `in`: its reference
// kernels are plain loops, far slower than widening to fp32, so they count
// as none.
bool onednn_has_matmul(Precision in) {
  return fast_impl({.in = in, .out = Precision::Fp32, .M = 64, .N = 64, .K = 64, .b_trans = true});
}

void forward_any(Precision in, float* out, const uint16_t* inp, const uint16_t* weight,
                 const float* bias, int64_t N, int64_t C, int64_t OC) {
  if (lowp_gemm_path(in) == LowpGemmPath::OneDnn)
    return forward_lowp(in, Precision::Fp32, out, inp, weight, bias, N, C, OC);
  matmul_forward(out, widen(in, inp, N * C, t_inp), widen(in, weight, OC * C, t_weight), bias, N,
                 C, OC);
}

void forward_out_any(Precision in, uint16_t* out, const uint16_t* inp, const uint16_t* weight,
                     const float* bias, int64_t N, int64_t C, int64_t OC) {
  if (lowp_gemm_path(in) == LowpGemmPath::OneDnn)
    return forward_lowp(in, in, out, inp, weight, bias, N, C, OC);
  if (int64_t(t_out.size()) < N * OC) t_out.resize(size_t(N * OC));
  float* out32 = t_out.data();  // (N, OC) fp32 result before rounding
  forward_any(in, out32, inp, weight, bias, N, C, OC);
  if (in == Precision::Bf16) cast_fp32_to_bf16(out, out32, N * OC);
  else cast_fp32_to_fp16(out, out32, N * OC);
}

template <float (*widen_one)(uint16_t)>
void backward_any(Precision in, float* dinp, float* dweight, float* dbias, const uint16_t* dout,
                  const uint16_t* inp, const uint16_t* weight, int64_t N, int64_t C, int64_t OC,
                  bool accumulate_dinp, bool accumulate_dweight) {
  if (lowp_gemm_path(in) == LowpGemmPath::OneDnn)
    return backward_lowp<widen_one>(in, dinp, dweight, dbias, dout, inp, weight, N, C, OC,
                                    accumulate_dinp, accumulate_dweight);
  // Only the operands the outputs asked for read: weight for dinp, inp for dweight.
  matmul_backward(dinp, dweight, dbias, widen(in, dout, N * OC, t_dout),
                  dweight ? widen(in, inp, N * C, t_inp) : nullptr,
                  dinp ? widen(in, weight, OC * C, t_weight) : nullptr, N, C, OC,
                  accumulate_dinp, accumulate_dweight);
}

void dinp_any(Precision in, float* dinp, const uint16_t* dout, const uint16_t* weight, int64_t N,
              int64_t C, int64_t OC, bool accumulate) {
  if (lowp_gemm_path(in) == LowpGemmPath::OneDnn)
    return dinp_lowp(in, dinp, dout, weight, N, C, OC, accumulate);
  // dinp (N, C) = dout (N, OC) @ weight (OC, C), as matmul_backward's
  sgemm('N', 'N', N, C, OC, widen(in, dout, N * OC, t_dout), OC,
        widen(in, weight, OC * C, t_weight), C, accumulate ? 1.0f : 0.0f, dinp, C);
}

void dweight_any(Precision in, float* dweight, const uint16_t* dout, const uint16_t* inp, int64_t N,
                 int64_t C, int64_t OC, bool accumulate) {
  if (lowp_gemm_path(in) == LowpGemmPath::OneDnn)
    return dweight_lowp(in, dweight, dout, inp, N, C, OC, accumulate);
  // dweight (OC, C) (+)= dout (N, OC)^T @ inp (N, C), as matmul_backward's
  sgemm('T', 'N', OC, C, N, widen(in, dout, N * OC, t_dout), OC, widen(in, inp, N * C, t_inp), C,
        accumulate ? 1.0f : 0.0f, dweight, C);
}

}  // namespace

LowpGemmPath lowp_gemm_path(Precision in) {
  TESSERA_CHECK(in == Precision::Bf16 || in == Precision::Fp16, "lowp_gemm_path: {} is not a 16-bit type",
                dtype_name(in));
  static const LowpGemmPath bf16 =
      onednn_has_matmul(Precision::Bf16) ? LowpGemmPath::OneDnn : LowpGemmPath::Fp32Compute;
  static const LowpGemmPath fp16 =
      onednn_has_matmul(Precision::Fp16) ? LowpGemmPath::OneDnn : LowpGemmPath::Fp32Compute;
  return in == Precision::Bf16 ? bf16 : fp16;
}

std::string lowp_gemm_path_description(Precision in) {
  const char* name = in == Precision::Bf16 ? "bf16" : "fp16";
  if (lowp_gemm_path(in) == LowpGemmPath::OneDnn)
    return fmt::format("{} GEMMs on oneDNN's {} matmul (isa {})", name, dtype_name(in),
                       onednn_cpu_isa());
  return fmt::format(
      "{} storage and rounding, GEMMs computed in fp32 (oneDNN has no {} matmul for isa {})", name,
      dtype_name(in), onednn_cpu_isa());
}

void matmul_forward_bf16(float* out, const bf16_t* inp, const bf16_t* weight, const float* bias,
                         int64_t N, int64_t C, int64_t OC) {
  forward_any(Precision::Bf16, out, inp, weight, bias, N, C, OC);
}
void matmul_forward_bf16_out(bf16_t* out, const bf16_t* inp, const bf16_t* weight,
                             const float* bias, int64_t N, int64_t C, int64_t OC) {
  forward_out_any(Precision::Bf16, out, inp, weight, bias, N, C, OC);
}
void matmul_backward_bf16(float* dinp, float* dweight, float* dbias, const bf16_t* dout,
                          const bf16_t* inp, const bf16_t* weight, int64_t N, int64_t C,
                          int64_t OC, bool accumulate_dinp, bool accumulate_dweight) {
  backward_any<bf16_to_fp32>(Precision::Bf16, dinp, dweight, dbias, dout, inp, weight, N, C, OC,
                             accumulate_dinp, accumulate_dweight);
}
void matmul_dinp_bf16(float* dinp, const bf16_t* dout, const bf16_t* weight, int64_t N, int64_t C,
                      int64_t OC, bool accumulate) {
  dinp_any(Precision::Bf16, dinp, dout, weight, N, C, OC, accumulate);
}
void matmul_dweight_bf16(float* dweight, const bf16_t* dout, const bf16_t* inp, int64_t N,
                         int64_t C, int64_t OC, bool accumulate) {
  dweight_any(Precision::Bf16, dweight, dout, inp, N, C, OC, accumulate);
}

void matmul_forward_fp16(float* out, const fp16_t* inp, const fp16_t* weight, const float* bias,
                         int64_t N, int64_t C, int64_t OC) {
  forward_any(Precision::Fp16, out, inp, weight, bias, N, C, OC);
}
void matmul_forward_fp16_out(fp16_t* out, const fp16_t* inp, const fp16_t* weight,
                             const float* bias, int64_t N, int64_t C, int64_t OC) {
  forward_out_any(Precision::Fp16, out, inp, weight, bias, N, C, OC);
}
void matmul_backward_fp16(float* dinp, float* dweight, float* dbias, const fp16_t* dout,
                          const fp16_t* inp, const fp16_t* weight, int64_t N, int64_t C,
                          int64_t OC, bool accumulate_dinp, bool accumulate_dweight) {
  backward_any<fp16_to_fp32>(Precision::Fp16, dinp, dweight, dbias, dout, inp, weight, N, C, OC,
                             accumulate_dinp, accumulate_dweight);
}
void matmul_dinp_fp16(float* dinp, const fp16_t* dout, const fp16_t* weight, int64_t N, int64_t C,
                      int64_t OC, bool accumulate) {
  dinp_any(Precision::Fp16, dinp, dout, weight, N, C, OC, accumulate);
}
void matmul_dweight_fp16(float* dweight, const fp16_t* dout, const fp16_t* inp, int64_t N,
                         int64_t C, int64_t OC, bool accumulate) {
  dweight_any(Precision::Fp16, dweight, dout, inp, N, C, OC, accumulate);
}

std::string bf16_gemm_impl(int64_t N, int64_t C, int64_t OC) {
  return gemm_lowp_impl({.in = Precision::Bf16, .out = Precision::Fp32, .M = N, .N = OC, .K = C,
                         .b_trans = true});
}

}  // namespace tessera::cpu

// The three GEMMs of a linear layer with 16-bit inputs: the low-precision
// twins of kernels/cpu/matmul.h (same shapes, same accumulate semantics).
// Weights are stored (out, in) as nn.Linear; bf16 / fp16 buffers hold bit
// patterns (core/dtype.h), made with kernels/cpu/cast.h.
//
// Each type runs on oneDNN's matmul with fp32 accumulation where this CPU
// and oneDNN have a real kernel for it (bf16: AVX512_BF16 dot products or
// AMX; fp16: AVX512_FP16 or AMX-FP16; docs/mixed_precision.md); otherwise
// the inputs are widened to fp32 (exactly) and the fp32 sgemm runs: 16-bit
// storage and rounding, fp32 compute (bf16 on an AVX2-only CPU, where
// oneDNN 2.6 has no bf16 matmul at all). lowp_gemm_path() says which.
//
// Gradients (dinp, dweight, dbias) are fp32: they are accumulated over
// micro-batches and reduced across ranks in fp32.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/core/dtype.h"

namespace tessera::cpu {

// out (N, OC) fp32 = inp (N, C) @ weight (OC, C)^T + bias (OC); bias may be null.
void matmul_forward_bf16(float* out, const bf16_t* inp, const bf16_t* weight, const float* bias,
                         int64_t N, int64_t C, int64_t OC);

// The same with a bf16 output: accumulated and biased in fp32, rounded once
// (to nearest even) on the way out, for activations stored in bf16.
void matmul_forward_bf16_out(bf16_t* out, const bf16_t* inp, const bf16_t* weight,
                             const float* bias, int64_t N, int64_t C, int64_t OC);

// dinp (N, C)     = or += dout (N, OC) @ weight (OC, C)   (accumulate_dinp selects +=)
// dweight (OC, C) += or = dout^T @ inp                   (accumulate_dweight selects +=; skipped when null)
// dbias (OC)      += sum over N of dout                  (skipped when null)
// dinp may be null when the input needs no gradient.
void matmul_backward_bf16(float* dinp, float* dweight, float* dbias, const bf16_t* dout,
                          const bf16_t* inp, const bf16_t* weight, int64_t N, int64_t C,
                          int64_t OC, bool accumulate_dinp, bool accumulate_dweight = true);

// The backward's two GEMMs one at a time, split as matmul_backward_bf16
// splits them: for timing each alone (kernels/gemm_peak.h, the planner's
// calibration). dinp (N, C) = or += dout @ weight; dweight (OC, C) += or =
// dout^T @ inp.
void matmul_dinp_bf16(float* dinp, const bf16_t* dout, const bf16_t* weight, int64_t N, int64_t C,
                      int64_t OC, bool accumulate);
void matmul_dweight_bf16(float* dweight, const bf16_t* dout, const bf16_t* inp, int64_t N,
                         int64_t C, int64_t OC, bool accumulate);

// Which way the GEMMs of a 16-bit type (BF16 or F16) run on this machine,
// decided once per type on first call.
enum class LowpGemmPath {
  OneDnn,       // oneDNN's bf16 / f16 matmul (AVX512_BF16, AMX, AVX512_FP16, ...)
  Fp32Compute,  // 16-bit storage, inputs widened to fp32 (exactly), fp32 sgemm
};
LowpGemmPath lowp_gemm_path(Precision in);
// One line for the log, e.g. "f16 storage and rounding, GEMMs computed in
// fp32 (oneDNN has no f16 matmul for isa avx512_core_bf16)".
std::string lowp_gemm_path_description(Precision in);

// The fp16 twins of the bf16 functions above, same shapes and semantics.
void matmul_forward_fp16(float* out, const fp16_t* inp, const fp16_t* weight, const float* bias,
                         int64_t N, int64_t C, int64_t OC);
void matmul_forward_fp16_out(fp16_t* out, const fp16_t* inp, const fp16_t* weight,
                             const float* bias, int64_t N, int64_t C, int64_t OC);
void matmul_backward_fp16(float* dinp, float* dweight, float* dbias, const fp16_t* dout,
                          const fp16_t* inp, const fp16_t* weight, int64_t N, int64_t C,
                          int64_t OC, bool accumulate_dinp, bool accumulate_dweight = true);
// The backward's two GEMMs one at a time, for `tessera calibrate`. On the
// fp32-compute path each widens the two operands it reads, so together they
// widen dout twice where matmul_backward_fp16 widens it once (N x OC
// conversions more per linear layer, a few per cent of its GEMM time).
void matmul_dinp_fp16(float* dinp, const fp16_t* dout, const fp16_t* weight, int64_t N, int64_t C,
                      int64_t OC, bool accumulate);
void matmul_dweight_fp16(float* dweight, const fp16_t* dout, const fp16_t* inp, int64_t N,
                         int64_t C, int64_t OC, bool accumulate);

// The oneDNN implementation of the bf16 forward GEMM at this shape
// ("brg:avx512_core_bf16", ...; "" if none), for the log.
std::string bf16_gemm_impl(int64_t N, int64_t C, int64_t OC);

}  // namespace tessera::cpu

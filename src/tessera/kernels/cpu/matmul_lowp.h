// The three GEMMs of a linear layer with 16-bit inputs: the low-precision
// twins of kernels/cpu/matmul.h (same shapes, same accumulate semantics).
// Weights are stored (out, in) as nn.Linear; bf16 / fp16 buffers hold bit
// patterns (core/dtype.h), made with kernels/cpu/cast.h.
//
// bf16: oneDNN's matmul, fp32 accumulation (AVX512_BF16 dot products on this
// machine, AMX where a CPU has it; docs/mixed_precision.md). fp16: oneDNN's
// f16 matmul where this CPU and oneDNN have one; otherwise the inputs are
// widened to fp32 (exactly) and the fp32 sgemm runs: fp16 storage and
// rounding, fp32 compute. fp16_gemm_path() says which, for the log.
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
// dweight (OC, C) += or = dout^T @ inp                   (accumulate_dweight selects +=)
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

// Whether the bf16 GEMMs run on a real oneDNN kernel on this CPU (not its
// reference loops, which are far slower than the fp32 sgemm).
bool bf16_gemm_is_fast();

// Which way the fp16 GEMMs run on this machine (decided once, on first call).
enum class Fp16GemmPath {
  OneDnnF16,    // oneDNN's f16 matmul (a CPU with AVX512_FP16 / AMX-FP16)
  Fp32Compute,  // fp16 storage, inputs widened to fp32, fp32 sgemm
};
Fp16GemmPath fp16_gemm_path();
// One line for the log, e.g. "fp16 storage, GEMMs computed in fp32 (oneDNN
// 2.6 has no f16 matmul for isa avx512_core_bf16)".
std::string fp16_gemm_path_description();

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

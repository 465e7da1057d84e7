// Linear layer on oneDNN's sgemm. Weights are stored (out, in), as nn.Linear.
#pragma once
#include <cstdint>

namespace tessera::cpu {

// out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias (OC); bias may be null.
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    int64_t N, int64_t C, int64_t OC);

// dinp (N, C)    = or += dout (N, OC) @ weight (OC, C)   (accumulate_dinp selects +=)
// dweight (OC, C) += or = dout^T @ inp                   (accumulate_dweight selects +=; skipped when null)
// dbias (OC)      += sum over N of dout                  (skipped when null)
// dinp may be null when the input needs no gradient.
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int64_t N, int64_t C, int64_t OC,
                     bool accumulate_dinp, bool accumulate_dweight = true);

// Row-major C (M, N) = op(A) op(B) + beta * C, op 'N' or 'T'; lda, ldb, ldc
// are the stored row lengths. The one fp32 GEMM the engine runs (the two
// above, and the GEMM-rate measurement of kernels/gemm_peak.h).
void sgemm(char ta, char tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace tessera::cpu

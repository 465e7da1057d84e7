// LayerNorm over the last dimension (eps 1e-5, as GPT-2).
#pragma once
#include <cstdint>

#include "tessera/core/dtype.h"

namespace tessera::cpu {

constexpr float kLayerNormEps = 1e-5f;

// out (N, C) = (inp - mean) * rstd * weight + bias; saves mean (N) and rstd (N) for backward.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, int64_t N, int64_t C);

// The same, with out (N, C) stored in bf16 / fp16 (--bf16 / --fp16: the
// output only feeds a GEMM). The statistics and every intermediate stay
// fp32; each output element is rounded once, so it equals the fp32
// kernel's output rounded to 16 bits.
void layernorm_forward_bf16(bf16_t* out, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int64_t N, int64_t C);
void layernorm_forward_fp16(fp16_t* out, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int64_t N, int64_t C);

// The residual add fused into the norm that reads the sum: res (N, C) +=
// addend (N, C), then out = layernorm(res) as above (16-bit forms: out
// stored in 16 bits). Each element's add and each row's norm are the
// operations of add() then layernorm_forward*(), so the results are the
// same bits; the residual stream is swept once instead of twice.
void residual_layernorm_forward(float* out, float* mean, float* rstd, float* res,
                                const float* addend, const float* weight, const float* bias,
                                int64_t N, int64_t C);
void residual_layernorm_forward_bf16(bf16_t* out, float* mean, float* rstd, float* res,
                                     const float* addend, const float* weight, const float* bias,
                                     int64_t N, int64_t C);
void residual_layernorm_forward_fp16(fp16_t* out, float* mean, float* rstd, float* res,
                                     const float* addend, const float* weight, const float* bias,
                                     int64_t N, int64_t C);

// dinp (N, C) += ; dweight (C) += ; dbias (C) += .
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int64_t N, int64_t C);

}  // namespace tessera::cpu

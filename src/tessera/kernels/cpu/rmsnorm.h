// RMSNorm over the last dimension (Llama's normalization, Megatron's
// --normalization RMSNorm): no centring and no bias, so one reduction per
// row instead of LayerNorm's two.
#pragma once
#include <cstdint>

#include "tessera/core/dtype.h"

namespace tessera::cpu {

// out (N, C) = inp * rstd * weight with rstd (N) = 1 / sqrt(mean(inp^2) + eps),
// saved for backward. eps: --norm-epsilon.
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t N,
                     int64_t C, float eps);

// The same with out (N, C) stored in bf16 / fp16 (--bf16 / --fp16: the
// output only feeds a GEMM). rstd and every intermediate stay fp32; each
// output element is rounded once, so it equals the fp32 kernel's output
// rounded to 16 bits.
void rmsnorm_forward_bf16(bf16_t* out, float* rstd, const float* inp, const float* weight,
                          int64_t N, int64_t C, float eps);
void rmsnorm_forward_fp16(fp16_t* out, float* rstd, const float* inp, const float* weight,
                          int64_t N, int64_t C, float eps);

// dinp (N, C) += ; dweight (C) += ; from dout (N, C), the forward's inp and
// its saved rstd (N).
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int64_t N, int64_t C);

}  // namespace tessera::cpu

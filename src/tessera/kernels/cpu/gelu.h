// GELU, tanh approximation (GPT-2's "gelu_new").
#pragma once
#include <cstdint>

#include "tessera/core/dtype.h"

namespace tessera::cpu {

// out (n) = gelu(inp (n))
void gelu_forward(float* out, const float* inp, int64_t n);

// The fc linear's bias fused into its GELU (fp32): pre (N, C) holds the
// GEMM's product without the bias; pre += bias (C) row by row, kept as the
// pre-activation backward needs, and out (N, C) = gelu(pre), in one pass
// instead of a bias pass and a GELU pass. Each element sees the operations
// of bias_add then gelu_forward, so the results are the same bits.
void bias_gelu_forward(float* out, float* pre, const float* bias, int64_t N, int64_t C);

// dinp (n) = dout (n) * gelu'(inp (n))     (written, not accumulated; may alias dout)
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n);

// --bf16 / --fp16: the MLP's pre-activation inp and its GELU out stored in
// 16 bits (out feeds the fc-proj GEMM). Computed in fp32 from the widened
// input, rounded once on the way out. The backward reads the 16-bit input
// and the fp32 dout and writes dinp in 16 bits: its only reader is the fc
// GEMM's backward, which takes 16-bit operands.
void gelu_forward_bf16(bf16_t* out, const bf16_t* inp, int64_t n);
void gelu_forward_fp16(fp16_t* out, const fp16_t* inp, int64_t n);
void gelu_backward_bf16(bf16_t* dinp, const bf16_t* inp, const float* dout, int64_t n);
void gelu_backward_fp16(fp16_t* dinp, const fp16_t* inp, const float* dout, int64_t n);

}  // namespace tessera::cpu

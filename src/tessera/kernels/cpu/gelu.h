// GELU, tanh approximation (GPT-2's "gelu_new").
#pragma once
#include <cstdint>

#include "tessera/core/dtype.h"

namespace tessera::cpu {

// out (n) = gelu(inp (n))
void gelu_forward(float* out, const float* inp, int64_t n);

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

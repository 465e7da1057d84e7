// SwiGLU, Llama's MLP activation (Megatron's --swiglu) with the gate fused
// into the fc GEMM: that GEMM writes rows [gate (F) | up (F)], and
// out = silu(gate) * up feeds the projection GEMM. silu(g) = g * sigmoid(g).
#pragma once
#include <cstdint>

#include "tessera/core/dtype.h"

namespace tessera::cpu {

// out (N, F) = silu(inp[:, :F]) * inp[:, F:], inp (N, 2F) = [gate | up].
void swiglu_forward(float* out, const float* inp, int64_t N, int64_t F);

// dinp (N, 2F) = [d gate | d up] from dout (N, F) (written, not accumulated;
// must not alias dout: it is twice as wide).
void swiglu_backward(float* dinp, const float* inp, const float* dout, int64_t N, int64_t F);

// --bf16 / --fp16: inp (the fc GEMM's output), out (the projection GEMM's
// input) and dinp (the fc GEMM's backward operand) stored in 16 bits, as
// GELU's; computed in fp32 from the widened input, each element rounded
// once. dout stays fp32.
void swiglu_forward_bf16(bf16_t* out, const bf16_t* inp, int64_t N, int64_t F);
void swiglu_forward_fp16(fp16_t* out, const fp16_t* inp, int64_t N, int64_t F);
void swiglu_backward_bf16(bf16_t* dinp, const bf16_t* inp, const float* dout, int64_t N,
                          int64_t F);
void swiglu_backward_fp16(fp16_t* dinp, const fp16_t* inp, const float* dout, int64_t N,
                          int64_t F);

}  // namespace tessera::cpu

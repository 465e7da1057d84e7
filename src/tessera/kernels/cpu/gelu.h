// GELU, tanh approximation (GPT-2's "gelu_new").
#pragma once
#include <cstdint>

namespace tessera::cpu {

// out (n) = gelu(inp (n))
void gelu_forward(float* out, const float* inp, int64_t n);

// dinp (n) = dout (n) * gelu'(inp (n))     (written, not accumulated; may alias dout)
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n);

}  // namespace tessera::cpu

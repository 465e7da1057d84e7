// Bias of a row-parallel linear, applied on its own: the matmul runs without
// bias on each tensor-parallel rank's partial product, and the bias is added
// once after the partial products have been summed.
#pragma once
#include <cstdint>

namespace tessera::cpu {

// out (N, C) += bias (C) on every row.
void bias_add(float* out, const float* bias, int64_t N, int64_t C);

}  // namespace tessera::cpu

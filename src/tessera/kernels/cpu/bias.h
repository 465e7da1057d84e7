// A linear's bias, forward and backward: the matmul kernels call these after
// their GEMM, and a row-parallel linear adds its bias on its own, once, after
// the tensor-parallel ranks' partial products have been summed.
#pragma once
#include <cstdint>

namespace tessera::cpu {

// out (N, C) += bias (C) on every row.
void bias_add(float* out, const float* bias, int64_t N, int64_t C);

// dbias (C) += column sums of dout (N, C). Threads own disjoint column
// ranges, so each column's sum order is fixed (deterministic) and nothing races.
void bias_backward(float* dbias, const float* dout, int64_t N, int64_t C);

}  // namespace tessera::cpu

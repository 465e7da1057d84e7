#include "tessera/kernels/cpu/bias.h"

namespace tessera::cpu {

void bias_add(float* out, const float* bias, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static) if (N * C > (1 << 15))
  for (int64_t n = 0; n < N; n++) {
    float* y = out + n * C;  // (C)
#pragma omp simd
    for (int64_t c = 0; c < C; c++) y[c] += bias[c];
  }
}

void bias_backward(float* dbias, const float* dout, int64_t N, int64_t C) {
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int64_t c0 = 0; c0 < C; c0 += 64) {
      const int64_t c1 = c0 + 64 < C ? c0 + 64 : C;
      float acc[64] = {};  // this block's column sums
      for (int64_t n = 0; n < N; ++n) {
        const float* row = dout + n * C;  // (C)
#pragma omp simd
        for (int64_t c = c0; c < c1; ++c) acc[c - c0] += row[c];
      }
      for (int64_t c = c0; c < c1; ++c) dbias[c] += acc[c - c0];
    }
  }
}

}  // namespace tessera::cpu

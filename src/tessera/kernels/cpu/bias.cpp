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

}  // namespace tessera::cpu

#include "tessera/kernels/cpu/matmul.h"

#include <cblas.h>

namespace tessera::cpu {

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    int64_t N, int64_t C, int64_t OC) {
  // out (N, OC) = inp (N, C) @ weight^T, weight (OC, C) row-major.
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C, 0.0f,
              out, OC);
  if (!bias) return;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* row = out + n * OC;
#pragma omp simd
    for (int64_t o = 0; o < OC; ++o) row[o] += bias[o];
  }
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int64_t N, int64_t C, int64_t OC,
                     bool accumulate_dinp) {
  // dinp (N, C) = dout (N, OC) @ weight (OC, C)
  if (dinp)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C,
                accumulate_dinp ? 1.0f : 0.0f, dinp, C);
  // dweight (OC, C) += dout^T (OC, N) @ inp (N, C)
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f,
              dweight, C);
  if (!dbias) return;
  // dbias (OC): column sums of dout. Threads own disjoint column ranges, so the
  // sum order per column is fixed (deterministic) and nothing races.
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int64_t o0 = 0; o0 < OC; o0 += 64) {
      int64_t o1 = o0 + 64 < OC ? o0 + 64 : OC;
      float acc[64] = {};
      for (int64_t n = 0; n < N; ++n) {
        const float* row = dout + n * OC;
#pragma omp simd
        for (int64_t o = o0; o < o1; ++o) acc[o - o0] += row[o];
      }
      for (int64_t o = o0; o < o1; ++o) dbias[o] += acc[o - o0];
    }
  }
}

}  // namespace tessera::cpu

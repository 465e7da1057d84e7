// RMSNorm forward and backward.
#include "tessera/kernels/cpu/rmsnorm.h"

#include <algorithm>
#include <cmath>

#include "tessera/kernels/cpu/storage.h"

namespace tessera::cpu {

namespace {

// Out: the output's storage (storage.h); everything else is fp32.
template <class Out>
void rmsnorm_forward_as(typename Out::T* out, float* rstd, const float* inp, const float* weight,
                        int64_t N, int64_t C, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    const float* x = inp + n * C;      // (C)
    typename Out::T* y = out + n * C;  // (C)
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t c = 0; c < C; c++) ss += x[c] * x[c];
    const float r = 1.0f / std::sqrt(ss / float(C) + eps);
#pragma omp simd
    for (int64_t c = 0; c < C; c++) y[c] = Out::store(x[c] * r * weight[c]);
    rstd[n] = r;
  }
}

}  // namespace

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t N,
                     int64_t C, float eps) {
  rmsnorm_forward_as<StoreF32>(out, rstd, inp, weight, N, C, eps);
}
void rmsnorm_forward_bf16(bf16_t* out, float* rstd, const float* inp, const float* weight,
                          int64_t N, int64_t C, float eps) {
  rmsnorm_forward_as<StoreBf16>(out, rstd, inp, weight, N, C, eps);
}
void rmsnorm_forward_fp16(fp16_t* out, float* rstd, const float* inp, const float* weight,
                          int64_t N, int64_t C, float eps) {
  rmsnorm_forward_as<StoreFp16>(out, rstd, inp, weight, N, C, eps);
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int64_t N, int64_t C) {
  // Pass 1, rows in parallel: dinp. With xhat = x * rstd and g = dout * weight,
  // dx = rstd * (g - xhat * mean(g * xhat)) (LayerNorm's formula without the
  // mean(g) term, as nothing was centred).
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    const float* x = inp + n * C;    // (C)
    const float* dy = dout + n * C;  // (C)
    float* dx = dinp + n * C;        // (C)
    const float r = rstd[n];
    float sgx = 0.0f;
#pragma omp simd reduction(+ : sgx)
    for (int64_t c = 0; c < C; c++) sgx += dy[c] * weight[c] * x[c] * r;
    const float mgx = sgx / float(C);
#pragma omp simd
    for (int64_t c = 0; c < C; c++) dx[c] += r * (dy[c] * weight[c] - x[c] * r * mgx);
  }

  // Pass 2, columns in parallel: dweight sums over all N rows. Each thread
  // owns a contiguous column range and walks the rows in order, so there is
  // no race and the result does not depend on the thread count.
  constexpr int64_t kChunk = 64;  // columns per task: whole cache lines, simd-wide
  const int64_t nchunks = (C + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < nchunks; k++) {
    const int64_t c0 = k * kChunk, c1 = std::min(C, c0 + kChunk);
    float dw[kChunk] = {};  // (kChunk) partial sums for this column range
    for (int64_t n = 0; n < N; n++) {
      const float* x = inp + n * C;    // (C)
      const float* dy = dout + n * C;  // (C)
      const float r = rstd[n];
#pragma omp simd
      for (int64_t c = c0; c < c1; c++) dw[c - c0] += dy[c] * x[c] * r;
    }
    for (int64_t c = c0; c < c1; c++) dweight[c] += dw[c - c0];
  }
}

}  // namespace tessera::cpu

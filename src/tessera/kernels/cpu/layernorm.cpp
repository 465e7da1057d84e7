// LayerNorm forward and backward.
#include "tessera/kernels/cpu/layernorm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tessera/kernels/cpu/storage.h"

namespace tessera::cpu {

namespace {

// One row: y (C) = (x - mean) * rstd * weight + bias, x (C) fp32, y in
// Out's storage (storage.h); the statistics are returned. Shared by the
// plain and the residual-fused forward, so both run the same loops and give
// the same bits.
template <class Out>
inline void layernorm_row(typename Out::T* y, float& mean, float& rstd, const float* x,
                          const float* weight, const float* bias, int64_t C) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t c = 0; c < C; c++) s += x[c];
  const float m = s / float(C);
  // Two passes (mean, then centered squares) rather than E[x^2] - E[x]^2,
  // which cancels badly when |mean| >> std.
  float v = 0.0f;
#pragma omp simd reduction(+ : v)
  for (int64_t c = 0; c < C; c++) {
    const float d = x[c] - m;
    v += d * d;
  }
  const float r = 1.0f / std::sqrt(v / float(C) + kLayerNormEps);
#pragma omp simd
  for (int64_t c = 0; c < C; c++) y[c] = Out::store((x[c] - m) * r * weight[c] + bias[c]);
  mean = m;
  rstd = r;
}

template <class Out>
void layernorm_forward_as(typename Out::T* out, float* mean, float* rstd, const float* inp,
                          const float* weight, const float* bias, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++)
    layernorm_row<Out>(out + n * C, mean[n], rstd[n], inp + n * C, weight, bias, C);
}

// res += addend, then the norm of each row while it is in L1: the residual
// stream is read and written once instead of once by an add and again by
// the norm.
template <class Out>
void residual_layernorm_forward_as(typename Out::T* out, float* mean, float* rstd, float* res,
                                   const float* addend, const float* weight, const float* bias,
                                   int64_t N, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    float* x = res + n * C;             // (C)
    const float* a = addend + n * C;    // (C)
#pragma omp simd
    for (int64_t c = 0; c < C; c++) x[c] = x[c] + a[c];  // elementwise.cpp add's operation
    layernorm_row<Out>(out + n * C, mean[n], rstd[n], x, weight, bias, C);
  }
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, int64_t N, int64_t C) {
  layernorm_forward_as<StoreF32>(out, mean, rstd, inp, weight, bias, N, C);
}
void layernorm_forward_bf16(bf16_t* out, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int64_t N, int64_t C) {
  layernorm_forward_as<StoreBf16>(out, mean, rstd, inp, weight, bias, N, C);
}
void layernorm_forward_fp16(fp16_t* out, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int64_t N, int64_t C) {
  layernorm_forward_as<StoreFp16>(out, mean, rstd, inp, weight, bias, N, C);
}

void residual_layernorm_forward(float* out, float* mean, float* rstd, float* res,
                                const float* addend, const float* weight, const float* bias,
                                int64_t N, int64_t C) {
  residual_layernorm_forward_as<StoreF32>(out, mean, rstd, res, addend, weight, bias, N, C);
}
void residual_layernorm_forward_bf16(bf16_t* out, float* mean, float* rstd, float* res,
                                     const float* addend, const float* weight, const float* bias,
                                     int64_t N, int64_t C) {
  residual_layernorm_forward_as<StoreBf16>(out, mean, rstd, res, addend, weight, bias, N, C);
}
void residual_layernorm_forward_fp16(fp16_t* out, float* mean, float* rstd, float* res,
                                     const float* addend, const float* weight, const float* bias,
                                     int64_t N, int64_t C) {
  residual_layernorm_forward_as<StoreFp16>(out, mean, rstd, res, addend, weight, bias, N, C);
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int64_t N, int64_t C) {
  // Pass 1, rows in parallel: dinp. With xhat = (x - mean) * rstd and
  // g = dout * weight, dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    const float* x = inp + n * C;    // (C)
    const float* dy = dout + n * C;  // (C)
    float* dx = dinp + n * C;        // (C)
    const float m = mean[n], r = rstd[n];
    float sg = 0.0f, sgx = 0.0f;
#pragma omp simd reduction(+ : sg, sgx)
    for (int64_t c = 0; c < C; c++) {
      const float g = dy[c] * weight[c];
      sg += g;
      sgx += g * (x[c] - m) * r;
    }
    const float mg = sg / float(C), mgx = sgx / float(C);
#pragma omp simd
    for (int64_t c = 0; c < C; c++) {
      const float xhat = (x[c] - m) * r;
      dx[c] += r * (dy[c] * weight[c] - mg - xhat * mgx);
    }
  }

  // Pass 2, columns in parallel: dweight and dbias are sums over all N rows.
  // Each thread owns a contiguous column range and walks the rows in order,
  // so there is no race and the result does not depend on the thread count.
  constexpr int64_t kChunk = 64;  // columns per task: whole cache lines, simd-wide
  const int64_t nchunks = (C + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < nchunks; k++) {
    const int64_t c0 = k * kChunk, c1 = std::min(C, c0 + kChunk);
    float dw[kChunk] = {}, db[kChunk] = {};  // (kChunk) partial sums for this column range
    for (int64_t n = 0; n < N; n++) {
      const float* x = inp + n * C;    // (C)
      const float* dy = dout + n * C;  // (C)
      const float m = mean[n], r = rstd[n];
#pragma omp simd
      for (int64_t c = c0; c < c1; c++) {
        dw[c - c0] += dy[c] * (x[c] - m) * r;
        db[c - c0] += dy[c];
      }
    }
    for (int64_t c = c0; c < c1; c++) {
      dweight[c] += dw[c - c0];
      dbias[c] += db[c - c0];
    }
  }
}

}  // namespace tessera::cpu

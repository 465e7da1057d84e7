// Token and position embeddings, forward and backward.
#include "tessera/kernels/cpu/embedding.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

namespace tessera::cpu {

void token_embedding_forward(float* out, const int32_t* tokens, const float* wte, int64_t N,
                             int64_t C, int64_t vocab_begin, int64_t vocab_end) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    float* y = out + n * C;  // (C)
    const int64_t tok = tokens[n];
    if (tok >= vocab_begin && tok < vocab_end) {
      std::memcpy(y, wte + (tok - vocab_begin) * C, sizeof(float) * C);
    } else {
      std::memset(y, 0, sizeof(float) * C);  // another rank's vocab slice holds it
    }
  }
}

void token_embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int64_t N,
                              int64_t C, int64_t vocab_begin, int64_t vocab_end) {
  // Several positions may hold the same token, so rows of dwte cannot be
  // scattered from a parallel loop over positions. Instead each thread owns a
  // contiguous range of dwte rows and scans all tokens in order, adding the
  // ones that land in its range: no race, and the summation order per row is
  // position order, whatever the thread count.
  const int64_t V = vocab_end - vocab_begin;
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t v0 = vocab_begin + V * t / nt, v1 = vocab_begin + V * (t + 1) / nt;
    for (int64_t n = 0; n < N; n++) {
      const int64_t tok = tokens[n];
      if (tok < v0 || tok >= v1) continue;
      float* dw = dwte + (tok - vocab_begin) * C;  // (C)
      const float* dy = dout + n * C;               // (C)
#pragma omp simd
      for (int64_t c = 0; c < C; c++) dw[c] += dy[c];
    }
  }
}

void position_embedding_forward(float* out, const float* wpe, int64_t B, int64_t T, int64_t C,
                                int64_t pos0) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; b++) {
    for (int64_t t = 0; t < T; t++) {
      float* y = out + (b * T + t) * C;            // (C)
      const float* w = wpe + (pos0 + t) * C;       // (C) row of the position table
#pragma omp simd
      for (int64_t c = 0; c < C; c++) y[c] += w[c];
    }
  }
}

void position_embedding_backward(float* dwpe, const float* dout, int64_t B, int64_t T, int64_t C) {
  // Partitioned over positions (rows of dwpe); the batch sum runs in b order.
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; t++) {
    float* dw = dwpe + t * C;  // (C)
    for (int64_t b = 0; b < B; b++) {
      const float* dy = dout + (b * T + t) * C;  // (C)
#pragma omp simd
      for (int64_t c = 0; c < C; c++) dw[c] += dy[c];
    }
  }
}

}  // namespace tessera::cpu

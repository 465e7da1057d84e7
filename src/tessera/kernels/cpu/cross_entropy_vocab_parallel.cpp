// Vocab-parallel softmax cross-entropy: the local halves of each step.
#include "tessera/kernels/cpu/cross_entropy_vocab_parallel.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessera/kernels/cpu/vec_math.h"

namespace tessera::cpu {

void vp_xent_local_max(float* row_max, const float* logits, int64_t N, int64_t V) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    row_max[n] = cpu::row_max(logits + n * V, V);  // (V) row
  }
}

void vp_xent_local_sums(float* sums, const float* logits, const float* row_max,
                        const int32_t* targets, int64_t N, int64_t V, int64_t vocab_begin) {
  float* sum_exp = sums;     // (N)
  float* target_x = sums + N;  // (N)
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    const float* x = logits + n * V;  // (V)
    sum_exp[n] = row_sum_exp(x, row_max[n], V);
    // Exactly one rank holds the target column; the others add 0.
    const int64_t t = int64_t(targets[n]) - vocab_begin;
    target_x[n] = targets[n] >= 0 && t >= 0 && t < V ? x[t] : 0.0f;
  }
}

void vp_xent_finish(float* losses, float* lse, const float* row_max, const float* sums,
                    const int32_t* targets, int64_t N) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    const float l = row_max[n] + std::log(sums[n]);
    lse[n] = l;
    losses[n] = targets[n] >= 0 ? l - sums[N + n] : 0.0f;
  }
}

namespace {

// O: the storage of dlogits (storage.h); logits and the arithmetic are fp32.
template <class O>
void vp_xent_backward_as(typename O::T* dlogits, const float* logits, const float* lse,
                         const int32_t* targets, float dloss, int64_t N, int64_t V,
                         int64_t vocab_begin) {
  // No __restrict: an fp32 dlogits may alias logits, each element is read then written.
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    const float* x = logits + n * V;      // (V)
    typename O::T* dx = dlogits + n * V;  // (V)
    if (targets[n] < 0) {
#pragma omp simd
      for (int64_t v = 0; v < V; v++) dx[v] = O::store(0.0f);
      continue;
    }
    xent_grad_row_as<O>(dx, x, lse[n], dloss, V, int64_t(targets[n]) - vocab_begin);
  }
}

}  // namespace

void vp_xent_backward(float* dlogits, const float* logits, const float* lse,
                      const int32_t* targets, float dloss, int64_t N, int64_t V,
                      int64_t vocab_begin) {
  vp_xent_backward_as<StoreF32>(dlogits, logits, lse, targets, dloss, N, V, vocab_begin);
}
void vp_xent_backward_bf16(bf16_t* dlogits, const float* logits, const float* lse,
                           const int32_t* targets, float dloss, int64_t N, int64_t V,
                           int64_t vocab_begin) {
  vp_xent_backward_as<StoreBf16>(dlogits, logits, lse, targets, dloss, N, V, vocab_begin);
}
void vp_xent_backward_fp16(fp16_t* dlogits, const float* logits, const float* lse,
                           const int32_t* targets, float dloss, int64_t N, int64_t V,
                           int64_t vocab_begin) {
  vp_xent_backward_as<StoreFp16>(dlogits, logits, lse, targets, dloss, N, V, vocab_begin);
}

}  // namespace tessera::cpu

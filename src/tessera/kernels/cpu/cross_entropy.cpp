// Softmax cross-entropy, forward and backward.
#include "tessera/kernels/cpu/cross_entropy.h"

#include <cmath>
#include <limits>

#include "tessera/core/error.h"
#include "tessera/kernels/cpu/vec_math.h"

namespace tessera::cpu {

void cross_entropy_forward(float* losses, float* lse, const float* logits, const int32_t* targets,
                           int64_t N, int64_t V) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    const float* x = logits + n * V;  // (V)
    const float m = row_max(x, V);  // subtracted so exp never overflows
    const float l = m + std::log(row_sum_exp(x, m, V));
    lse[n] = l;
    const int32_t tgt = targets[n];
    losses[n] = tgt >= 0 && tgt < V ? l - x[tgt] : 0.0f;
  }
  // A target >= V is a data bug (a token the model cannot predict); say so.
  for (int64_t n = 0; n < N; n++)
    TESSERA_CHECK(targets[n] < V, "cross_entropy: target {} at row {} is outside the vocabulary ({})",
                  targets[n], n, V);
}

namespace {

// O: the storage of dlogits (storage.h); logits and the arithmetic are fp32.
template <class O>
void cross_entropy_backward_as(typename O::T* dlogits, const float* logits, const float* lse,
                               const int32_t* targets, float dloss, int64_t N, int64_t V) {
  // No __restrict: an fp32 dlogits may alias logits, each element is read then written.
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    const float* x = logits + n * V;        // (V)
    typename O::T* dx = dlogits + n * V;    // (V)
    const int32_t tgt = targets[n];
    if (tgt < 0 || tgt >= V) {  // ignored (>= V was rejected by the forward)
#pragma omp simd
      for (int64_t v = 0; v < V; v++) dx[v] = O::store(0.0f);
      continue;
    }
    xent_grad_row_as<O>(dx, x, lse[n], dloss, V, tgt);
  }
}

}  // namespace

void cross_entropy_backward(float* dlogits, const float* logits, const float* lse,
                            const int32_t* targets, float dloss, int64_t N, int64_t V) {
  cross_entropy_backward_as<StoreF32>(dlogits, logits, lse, targets, dloss, N, V);
}
void cross_entropy_backward_bf16(bf16_t* dlogits, const float* logits, const float* lse,
                                 const int32_t* targets, float dloss, int64_t N, int64_t V) {
  cross_entropy_backward_as<StoreBf16>(dlogits, logits, lse, targets, dloss, N, V);
}
void cross_entropy_backward_fp16(fp16_t* dlogits, const float* logits, const float* lse,
                                 const int32_t* targets, float dloss, int64_t N, int64_t V) {
  cross_entropy_backward_as<StoreFp16>(dlogits, logits, lse, targets, dloss, N, V);
}

}  // namespace tessera::cpu

// Scalar math written so that GCC vectorizes it inside `#pragma omp simd`
// loops. glibc's vector expf is only used under -ffast-math, which we do not
// build with, so a libm call would keep softmax / GELU loops scalar.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "tessera/kernels/cpu/storage.h"

namespace tessera::cpu {

// exp(x) to within ~2 ulp for x in [-87, 88]; inputs outside are clamped, so
// the result is never inf or denormal (exp(-inf) gives ~1e-38, not 0).
// Cody-Waite range reduction x = n*ln2 + r, |r| <= ln2/2, then a degree-6
// minimax polynomial for exp(r) (coefficients from Cephes' expf).
inline float exp_fast(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  // Round x*log2(e) to nearest by adding 1.5*2^23: the integer lands in the
  // low mantissa bits, no libm rounding call needed.
  constexpr float kShift = 12582912.0f;
  float t = x * 1.44269504088896341f + kShift;
  float n = t - kShift;
  int32_t ni = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kShift);
  float r = x - n * 0.693359375f;  // ln2 high part, exact in n*hi
  r = r - n * -2.12194440e-4f;     // ln2 low part
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float er = p * r * r + r + 1.0f;
  // 2^n assembled in the exponent field; n is in [-126, 127] after the clamp.
  float scale = std::bit_cast<float>((ni + 127) << 23);
  return er * scale;
}

// tanh(x) = 1 - 2 / (exp(2x) + 1): saturates to +-1 through the exp clamp.
// Absolute error ~1e-7 (relative error is larger near 0, which GELU does not care about).
inline float tanh_fast(float x) { return 1.0f - 2.0f / (exp_fast(2.0f * x) + 1.0f); }

// max of x (V), the shift that keeps a softmax's exponentials from overflowing.
inline float row_max(const float* x, int64_t V) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t v = 0; v < V; v++) m = std::max(m, x[v]);
  return m;
}

// sum of exp(x[v] - m) over x (V).
inline float row_sum_exp(const float* x, float m, int64_t V) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t v = 0; v < V; v++) s += exp_fast(x[v] - m);
  return s;
}

// One row of the cross-entropy gradient, dx (V) = dloss * (softmax(x) - onehot(t)),
// softmax from the row's log-sum-exp; no one-hot where t is outside [0, V)
// (a vocab-parallel rank whose slice does not hold the target). dx may
// alias x: each element is read, then written.
inline void xent_grad_row(float* dx, const float* x, float lse, float dloss, int64_t V, int64_t t) {
#pragma omp simd
  for (int64_t v = 0; v < V; v++) dx[v] = exp_fast(x[v] - lse) * dloss;
  if (t >= 0 && t < V) dx[t] -= dloss;
}

// dx (V) = xent_grad_row's fp32 row in O's storage. A 16-bit row is formed
// in fp32 first (in a per-thread row that stays in cache) and rounded once,
// so it has exactly the bits of the rounded fp32 gradient whatever the
// compiler fuses: the target's column is the stored value minus dloss.
template <class O>
void xent_grad_row_as(typename O::T* dx, const float* x, float lse, float dloss, int64_t V,
                      int64_t t) {
  if constexpr (std::is_same_v<O, StoreF32>) {
    xent_grad_row(dx, x, lse, dloss, V, t);
  } else {
    thread_local std::vector<float> row;
    row.resize(size_t(V));
    xent_grad_row(row.data(), x, lse, dloss, V, t);
#pragma omp simd
    for (int64_t v = 0; v < V; v++) dx[v] = O::store(row[v]);
  }
}

}  // namespace tessera::cpu

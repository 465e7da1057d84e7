// Elementwise helpers and reductions.
#include "tessera/kernels/cpu/elementwise.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "tessera/kernels/cpu/cast.h"

namespace tessera::cpu {

namespace {
// Below this many elements a parallel region costs more than the loop.
constexpr int64_t kParallelMin = 1 << 15;
// Fixed reduction chunk: partial sums are formed per chunk, not per thread,
// so a reduction gives the same bits for any thread count.
constexpr int64_t kReduceChunk = 1 << 16;
}  // namespace

void add(float* out, const float* a, const float* b, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void accumulate(float* y, const float* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

namespace {
template <float (*widen)(uint16_t)>
void accumulate_widened(float* y, const uint16_t* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; i++) y[i] += widen(x[i]);
}
}  // namespace

void accumulate_bf16(float* y, const bf16_t* x, int64_t n) {
  accumulate_widened<bf16_to_fp32>(y, x, n);
}
void accumulate_fp16(float* y, const fp16_t* x, int64_t n) {
  accumulate_widened<fp16_to_fp32>(y, x, n);
}

void copy_bytes(void* out, const void* in, int64_t bytes) {
  if (bytes > 0) std::memcpy(out, in, size_t(bytes));
}
void fill(float* x, float value, int64_t n) { std::fill_n(x, n, value); }
void fill_u16(uint16_t* x, uint16_t bits, int64_t n) { std::fill_n(x, n, bits); }

void scale(float* x, float s, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; i++) x[i] *= s;
}

double sum_squares(const float* x, int64_t n) {
  const int64_t nchunks = (n + kReduceChunk - 1) / kReduceChunk;
  std::vector<double> partial(nchunks);  // (nchunks) one sum per fixed chunk
#pragma omp parallel for schedule(static) if (nchunks > 1)
  for (int64_t k = 0; k < nchunks; k++) {
    const int64_t i0 = k * kReduceChunk, i1 = std::min(n, i0 + kReduceChunk);
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = i0; i < i1; i++) s += double(x[i]) * double(x[i]);
    partial[k] = s;
  }
  double total = 0.0;
  for (double p : partial) total += p;  // in chunk order: deterministic
  return total;
}

bool all_finite(const float* x, int64_t n) {
  // Exponent all ones means inf or nan; a bit test vectorizes where
  // std::isfinite may not.
  int64_t bad = 0;
#pragma omp parallel for simd schedule(static) reduction(+ : bad) if (n > kParallelMin)
  for (int64_t i = 0; i < n; i++)
    bad += (std::bit_cast<uint32_t>(x[i]) & 0x7f800000u) == 0x7f800000u;
  return bad == 0;
}

}  // namespace tessera::cpu

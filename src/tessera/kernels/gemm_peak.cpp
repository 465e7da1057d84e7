#include "tessera/kernels/gemm_peak.h"

#include <algorithm>
#include <cstdint>

#include "tessera/core/buffer.h"
#include "tessera/core/timer.h"
#include "tessera/core/error.h"
#include "tessera/kernels/backend.h"
#include "tessera/kernels/cpu/matmul.h"

namespace tessera::kernels {

namespace {

// Small values that neither overflow nor go denormal through K products;
// written by the threads that run the GEMM (first touch).
void fill(float* p, int64_t n, float scale) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = scale * float((i * 7919) % 101 - 50) / 50.0f;
}

// One untimed warm-up (page faults, the library's kernel choice, thread
// start), then the seconds of each timed repeat of run().
template <class Run>
std::vector<double> timed_repeats(Run&& run, const GemmTiming& timing) {
  run();
  std::vector<double> seconds;
  double total = 0;
  for (int rep = 0; rep < 500 && (rep < timing.min_reps || total < timing.min_seconds); ++rep) {
    if (timing.cold_caches) evict_private_caches();
    Stopwatch sw;
    run();
    seconds.push_back(sw.elapsed());
    total += seconds.back();
  }
  return seconds;
}

}  // namespace

void evict_private_caches() {
  static Buffer scratch(int64_t(4) << 20);  // 16 MiB: 4 x this machine class's L2 per core
  float* p = scratch.f32();
  const int64_t n = scratch.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i += 16) p[i] += 1.0f;  // one write per 64-byte line
}

std::vector<double> gemm_fp32_seconds(const GemmShape& s, const GemmTiming& timing) {
  // Row-major operands as stored: op 'T' reads the transpose of what is stored.
  const int64_t a_rows = s.ta == 'N' ? s.M : s.K, a_cols = s.ta == 'N' ? s.K : s.M;
  const int64_t b_rows = s.tb == 'N' ? s.K : s.N, b_cols = s.tb == 'N' ? s.N : s.K;
  Buffer a(a_rows * a_cols);  // (a_rows, a_cols)
  Buffer b(b_rows * b_cols);  // (b_rows, b_cols)
  Buffer c(s.M * s.N);        // (M, N)
  fill(a.f32(), a_rows * a_cols, 0.1f);
  fill(b.f32(), b_rows * b_cols, 0.1f);
  fill(c.f32(), s.M * s.N, 0.0f);
  auto run = [&] {
    cpu::sgemm(s.ta, s.tb, s.M, s.N, s.K, a.f32(), a_cols, b.f32(), b_cols, s.beta, c.f32(), s.N);
  };
  return timed_repeats(run, timing);
}

std::vector<double> gemm_linear_seconds(const Backend& backend, Precision precision,
                                        const GemmShape& s, const GemmTiming& timing) {
  const bool forward = s.ta == 'N' && s.tb == 'T', dinp = s.ta == 'N' && s.tb == 'N',
             dweight = s.ta == 'T' && s.tb == 'N';
  TESSERA_CHECK(forward || dinp || dweight,
                "gemm_linear_seconds: transposes {}{} are no GEMM of a linear layer", s.ta, s.tb);
  // A as stored: (M, K) forward and input gradient, (K, M) weight gradient;
  // B (N, K) forward, (K, N) otherwise; X (M, N): the operand a role does
  // not read but the call still takes at its shape (the input gradient's
  // inp, the weight gradient's weight). In `precision`, cast from fp32 by
  // the backend itself; C (M, N) fp32.
  const bool lowp = precision != Precision::Fp32;
  Buffer wide_a(s.M * s.K), wide_b(s.K * s.N), wide_x(s.M * s.N), c(s.M * s.N);
  fill(wide_a.f32(), s.M * s.K, 0.1f);
  fill(wide_b.f32(), s.K * s.N, 0.1f);
  fill(wide_x.f32(), s.M * s.N, 0.1f);
  fill(c.f32(), s.M * s.N, 0.0f);
  ConstAct a = wide_a.f32(), b = wide_b.f32(), x = wide_x.f32();
  // (M, K), (K, N), (M, N) 16-bit patterns; empty in fp32.
  std::vector<uint16_t> narrow_a(lowp ? size_t(s.M * s.K) : 0),
      narrow_b(lowp ? size_t(s.K * s.N) : 0), narrow_x(lowp ? size_t(s.M * s.N) : 0);
  if (lowp) {
    backend.cast(Act(narrow_a.data(), precision), a, s.M * s.K);
    backend.cast(Act(narrow_b.data(), precision), b, s.K * s.N);
    backend.cast(Act(narrow_x.data(), precision), x, s.M * s.N);
    a = ConstAct(narrow_a.data(), precision);
    b = ConstAct(narrow_b.data(), precision);
    x = ConstAct(narrow_x.data(), precision);
  }
  const bool accumulate = s.beta != 0;
  auto run = [&] {
    if (forward)  // out (M rows, N) = inp (M rows, K) @ weight (N, K)^T
      backend.matmul_forward(c.f32(), a, b, nullptr, s.M, s.K, s.N);
    else if (dinp)  // dinp (M rows, N) = dout (M rows, K) @ weight (K, N)
      backend.matmul_backward(c.f32(), nullptr, nullptr, a, x, b, s.M, s.N, s.K, accumulate, false);
    else  // dweight (M, N) (+)= dout (K rows, M)^T @ inp (K rows, N)
      backend.matmul_backward(nullptr, c.f32(), nullptr, a, b, x, s.K, s.N, s.M, false, accumulate);
  };
  return timed_repeats(run, timing);
}

}  // namespace tessera::kernels

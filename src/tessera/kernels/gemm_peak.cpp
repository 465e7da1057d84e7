#include "tessera/kernels/gemm_peak.h"

#include "tessera/core/buffer.h"
#include "tessera/core/timer.h"
#include "tessera/kernels/cpu/matmul.h"

namespace tessera::kernels {

namespace {

// Small values that neither overflow nor go denormal through K products;
// written by the threads that run the GEMM (first touch).
void fill(float* p, int64_t n, float scale) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = scale * float((i * 7919) % 101 - 50) / 50.0f;
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
  run();  // warm-up
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

}  // namespace tessera::kernels

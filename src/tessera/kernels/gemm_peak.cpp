#include "tessera/kernels/gemm_peak.h"

#include <algorithm>
#include <cstdint>

#include "tessera/core/buffer.h"
#include "tessera/core/timer.h"
#include "tessera/core/error.h"
#include "tessera/kernels/cpu/cast.h"
#include "tessera/kernels/cpu/matmul.h"
#include "tessera/kernels/cpu/matmul_lowp.h"

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

std::vector<double> gemm_lowp_seconds(Precision precision, const GemmShape& s,
                                      const GemmTiming& timing) {
  const bool forward = s.ta == 'N' && s.tb == 'T', dinp = s.ta == 'N' && s.tb == 'N',
             dweight = s.ta == 'T' && s.tb == 'N';
  TESSERA_CHECK(forward || dinp || dweight,
                "gemm_lowp_seconds: transposes {}{} are no GEMM of a linear layer", s.ta, s.tb);
  TESSERA_CHECK(precision != Precision::Fp32, "gemm_lowp_seconds: fp32 is gemm_fp32_seconds");
  const bool bf16 = precision == Precision::Bf16;
  // A as stored: (M, K) forward and input gradient, (K, M) weight gradient.
  std::vector<uint16_t> a(size_t(s.M * s.K)), b(size_t(s.K * s.N));  // 16-bit patterns
  Buffer c(s.M * s.N);                                               // (M, N) fp32
  {
    Buffer wide(std::max(s.M * s.K, s.K * s.N));
    auto narrow = [&](std::vector<uint16_t>& to, int64_t n) {
      fill(wide.f32(), n, 0.1f);
      if (bf16) cpu::cast_fp32_to_bf16(to.data(), wide.f32(), n);
      else cpu::cast_fp32_to_fp16(to.data(), wide.f32(), n);
    };
    narrow(a, s.M * s.K);
    narrow(b, s.K * s.N);
  }
  fill(c.f32(), s.M * s.N, 0.0f);
  auto run = [&] {
    if (forward) {  // out (N rows, OC) = inp (N rows, C) @ weight (OC, C)^T
      if (bf16) cpu::matmul_forward_bf16(c.f32(), a.data(), b.data(), nullptr, s.M, s.K, s.N);
      else cpu::matmul_forward_fp16(c.f32(), a.data(), b.data(), nullptr, s.M, s.K, s.N);
    } else if (dinp) {  // dinp (N rows, C) = dout (N rows, OC) @ weight (OC, C)
      if (bf16) cpu::matmul_dinp_bf16(c.f32(), a.data(), b.data(), s.M, s.N, s.K, s.beta != 0);
      else cpu::matmul_dinp_fp16(c.f32(), a.data(), b.data(), s.M, s.N, s.K, s.beta != 0);
    } else {  // dweight (OC, C) += dout (N rows, OC)^T @ inp (N rows, C)
      if (bf16) cpu::matmul_dweight_bf16(c.f32(), a.data(), b.data(), s.K, s.N, s.M, s.beta != 0);
      else cpu::matmul_dweight_fp16(c.f32(), a.data(), b.data(), s.K, s.N, s.M, s.beta != 0);
    }
  };
  return timed_repeats(run, timing);
}

}  // namespace tessera::kernels

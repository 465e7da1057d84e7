// Why the engine redraws dropout masks instead of storing them: the time to
// apply a hidden-state dropout from its counter-based generator (Philox,
// kernels/cpu/dropout.h) against applying a stored mask (one byte or one bit
// per element, the alternatives), and what attention-probability dropout
// adds to the flash attention kernels. GPT-2 124M shapes by default
// (B*T = 256 rows of C = 768; attention B 4, T 64, 12 heads of 64).
// Usage: bench_dropout [repeats]   (OMP_NUM_THREADS sets the threads)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tessera/core/rng.h"
#include "tessera/kernels/cpu/attention.h"
#include "tessera/kernels/cpu/dropout.h"

using namespace tessera;

namespace {

template <typename F>
double median_seconds(int repeats, F f) {
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

DropoutSite site(DropoutSiteKind kind) {
  DropoutSite s;
  s.p = 0.1f;
  s.seed = 1;
  s.step = 1;
  s.layer = 0;
  s.site = kind;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 51;
  const int64_t rows = 256, C = 768, T = 64, n = rows * C;
  std::vector<float> x(size_t(n), 1.0f);                // (rows, C)
  std::vector<uint8_t> byte_mask(static_cast<size_t>(n));  // (rows, C) stored 0/1
  std::vector<uint64_t> bit_mask(static_cast<size_t>((n + 63) / 64));  // (rows * C / 64) bits
  for (int64_t i = 0; i < n; ++i) {
    byte_mask[size_t(i)] = rng_u64(3, 0, uint64_t(i)) % 10 != 0;
    if (byte_mask[size_t(i)]) bit_mask[size_t(i / 64)] |= uint64_t(1) << (i % 64);
  }
  const float scale = 1.0f / 0.9f;
  const double regen = median_seconds(
      repeats, [&] { cpu::dropout_rows(x.data(), rows, C, 0, T, site(DropoutSiteKind::MlpOut)); });
  const double bytes = median_seconds(repeats, [&] {
#pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = byte_mask[size_t(i)] ? x[size_t(i)] * scale : 0.0f;
  });
  const double bits = median_seconds(repeats, [&] {
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i)
      x[size_t(i)] = (bit_mask[size_t(i / 64)] >> (i % 64)) & 1 ? x[size_t(i)] * scale : 0.0f;
  });
  std::printf("hidden dropout over (%ld, %ld): redraw (Philox) %.1f us, stored byte mask %.1f us, "
              "stored bit mask %.1f us\n",
              long(rows), long(C), regen * 1e6, bytes * 1e6, bits * 1e6);

  const int64_t B = 4, NH = 12, AC = 768;
  std::vector<float> qkv(size_t(B * T * 3 * AC)), out(size_t(B * T * AC)), lse(size_t(B * NH * T)),
      dout(size_t(B * T * AC)), dqkv(size_t(B * T * 3 * AC));
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = rng_normal(5, 0, i);
  for (size_t i = 0; i < dout.size(); ++i) dout[i] = rng_normal(6, 0, i);
  const DropoutSite probs = site(DropoutSiteKind::AttentionProbs);
  auto attn = [&](const DropoutSite* d) {
    return median_seconds(repeats, [&] {
      cpu::attention_forward(out.data(), lse.data(), qkv.data(), B, T, AC, NH, d);
      cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T,
                              AC, NH, d);
    });
  };
  const double plain = attn(nullptr), dropped = attn(&probs);
  std::printf("attention forward+backward (B %ld, T %ld, %ld heads): %.1f us plain, %.1f us with "
              "probability dropout (+%.0f %%)\n",
              long(B), long(T), long(NH), plain * 1e6, dropped * 1e6,
              100.0 * (dropped / plain - 1.0));
  return 0;
}

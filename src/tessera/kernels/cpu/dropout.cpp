#include "tessera/kernels/cpu/dropout.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tessera/core/error.h"
#include "tessera/core/philox.h"
#include "tessera/core/rng.h"

namespace tessera::cpu {

DropoutStream::DropoutStream(const DropoutSite& s) {
  TESSERA_CHECK(s.p >= 0.0f && s.p < 1.0f, "dropout probability {} is outside [0, 1)", s.p);
  // The step enters the key (not the counter) so the counter's 128 bits stay
  // free for positions; splitmix64 spreads (seed, step) over the 64 key bits.
  const uint64_t key = splitmix64(splitmix64(s.seed) ^ uint64_t(s.step));
  k0 = uint32_t(key);
  k1 = uint32_t(key >> 32);
  c3 = uint32_t(s.layer) << 8 | uint32_t(s.site);
  // p * 2^32 rounded down; p < 1 keeps it below 2^32.
  threshold = uint32_t(std::min(std::ldexp(double(s.p), 32), 4294967295.0));
}

void dropout_bits(const DropoutStream& st, int64_t sample, int64_t e0, int64_t n, uint32_t* bits) {
  // Batches of whole Philox groups (four words each) in a loop with no
  // branches, which GCC vectorises (AVX-512 does 16 counters at once); the
  // batch's words are then copied out from the first wanted element.
  constexpr int64_t kBatch = 256;                // elements per batch
  alignas(64) uint32_t words[kBatch + 8];        // (groups * 4) the batch's words
  const uint32_t c2 = uint32_t(sample);
  const uint32_t sample_hi = uint32_t(uint64_t(sample) >> 32) << 16;
  for (int64_t done = 0; done < n; done += kBatch) {
    const int64_t m = std::min(kBatch, n - done);
    const uint64_t first = uint64_t(e0 + done);
    const uint64_t g0 = first >> 2;
    const int64_t skip = int64_t(first & 3), groups = (skip + m + 3) >> 2;
#pragma omp simd
    for (int64_t k = 0; k < groups; ++k) {
      const uint64_t g = g0 + uint64_t(k);
      const Philox4x32 r =
          philox4x32_10({{uint32_t(g), uint32_t(g >> 32) | sample_hi, c2, st.c3}}, st.k0, st.k1);
      words[4 * k] = r.c[0];
      words[4 * k + 1] = r.c[1];
      words[4 * k + 2] = r.c[2];
      words[4 * k + 3] = r.c[3];
    }
    std::copy_n(words + skip, m, bits + done);
  }
}

void dropout_rows(float* x, int64_t rows, int64_t C, int64_t row0, int64_t T,
                  const DropoutSite& site) {
  if (!site.active()) return;
  const DropoutStream st(site);
  const float scale = site.keep_scale();
  // Rows are independent and each draws its own bits: threads split them freely.
#pragma omp parallel
  {
    std::vector<uint32_t> bits(static_cast<size_t>(C));  // (C) one row's random words
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t g = row0 + r;  // global row of the micro-batch
      dropout_bits(st, site.first_sample + g / T, (g % T) * C, C, bits.data());
      float* xr = x + r * C;  // (C)
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) xr[c] = bits[c] >= st.threshold ? xr[c] * scale : 0.0f;
    }
  }
}

}  // namespace tessera::cpu

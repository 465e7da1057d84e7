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
  const uint64_t g0 = uint64_t(e0) >> 2, g1 = (uint64_t(e0 + n) + 3) >> 2;  // groups of four
  const uint32_t c2 = uint32_t(sample);
  const uint32_t sample_hi = uint32_t(uint64_t(sample) >> 32) << 16;
  for (uint64_t g = g0; g < g1; ++g) {
    const Philox4x32 r = philox4x32_10(
        {{uint32_t(g), uint32_t(g >> 32) | sample_hi, c2, st.c3}}, st.k0, st.k1);
    for (int w = 0; w < 4; ++w) {
      const int64_t i = int64_t(g * 4 + w) - e0;
      if (i >= 0 && i < n) bits[i] = r.c[w];
    }
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

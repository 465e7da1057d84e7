// fp32 <-> bf16 / fp16 casts: every 16-bit pattern round-trips, every tie
// between two neighbouring 16-bit values goes to the even one, random fp32
// values round as an independent double-precision reference says, and the
// buffer forms (hardware conversion on AVX-512) give the scalar forms' bits.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tessera/kernels/cpu/cast.h"
#include "tessera/kernels/cpu/storage.h"

using namespace tessera;
using namespace tessera::cpu;

namespace {

struct Format {
  int man_bits;     // stored mantissa bits: 7 (bf16), 10 (fp16)
  int min_exp;      // exponent of the smallest normal: -126, -14
  double overflow;  // 2^(max_exp + 1): the first power of two past the format
  uint16_t inf;     // positive infinity's pattern
};
constexpr Format kBf16{7, -126, 0x1p128, 0x7f80};
constexpr Format kFp16{10, -14, 0x1p16, 0x7c00};

bool is_nan16(uint16_t h, const Format& f) { return (h & 0x7fff) > f.inf; }

// The value a finite fp32 x rounds to, computed in double: the spacing of the
// format at |x| (fixed below the smallest normal), nearbyint (ties to even,
// the default rounding mode) on the exact quotient, inf at or past the
// overflow threshold (the rounded value reaching 2^(max_exp+1)).
double reference_round(float x, const Format& f) {
  const double a = std::fabs(double(x));
  if (a == 0 || std::isinf(a)) return x;
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): exponent is e - 1
  const int exp = std::max(e - 1, f.min_exp);
  const double ulp = std::ldexp(1.0, exp - f.man_bits);
  double r = std::nearbyint(a / ulp) * ulp;
  if (r >= f.overflow) r = INFINITY;
  return std::copysign(r, double(x));
}

// ~1M fp32 patterns spread over the whole space (a prime stride), so every
// exponent, both signs, subnormals, infs and NaNs are visited.
std::vector<float> spread_fp32() {
  std::vector<float> v;
  for (uint64_t u = 0; u <= 0xffffffffull; u += 4093) v.push_back(std::bit_cast<float>(uint32_t(u)));
  v.push_back(INFINITY), v.push_back(-INFINITY), v.push_back(0.0f), v.push_back(-0.0f);
  return v;
}

template <typename ToF, typename FromF>
void expect_all_patterns_round_trip(const Format& f, ToF to_fp32, FromF from_fp32) {
  for (uint32_t h = 0; h <= 0xffff; h++) {
    const float x = to_fp32(uint16_t(h));
    const uint16_t back = from_fp32(x);
    if (is_nan16(uint16_t(h), f)) {
      ASSERT_TRUE(std::isnan(x)) << std::hex << h;
      ASSERT_TRUE(is_nan16(back, f)) << std::hex << h;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << "NaN sign " << std::hex << h;
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

// For every pair of neighbours (h, h+1) of one sign, the fp32 midpoint goes
// to the even pattern and the fp32 values either side of it go to the
// nearer one. The last pair is (largest finite, inf): its midpoint overflows.
template <typename ToF, typename FromF>
void expect_ties_to_even(const Format& f, ToF to_fp32, FromF from_fp32) {
  for (uint16_t sign : {uint16_t(0), uint16_t(0x8000)}) {
    for (uint16_t h = 0; h < f.inf; h++) {
      const uint16_t lo = sign | h, hi = sign | uint16_t(h + 1);
      const double up = hi == (sign | f.inf) ? std::copysign(f.overflow, to_fp32(lo))
                                             : double(to_fp32(hi));
      const float mid = float((double(to_fp32(lo)) + up) / 2);  // exact: one more bit
      ASSERT_EQ(double(mid), (double(to_fp32(lo)) + up) / 2) << std::hex << h;
      const uint16_t even = (lo & 1) ? hi : lo;
      ASSERT_EQ(from_fp32(mid), even) << "tie " << std::hex << lo;
      const float toward_lo = std::nextafter(mid, to_fp32(lo));
      const float toward_hi = std::nextafter(mid, float(up));
      ASSERT_EQ(from_fp32(toward_lo), lo) << "below tie " << std::hex << lo;
      ASSERT_EQ(from_fp32(toward_hi), hi) << "above tie " << std::hex << lo;
    }
  }
}

template <typename ToF, typename FromF>
void expect_matches_reference(const Format& f, ToF to_fp32, FromF from_fp32) {
  for (float x : spread_fp32()) {
    const uint16_t h = from_fp32(x);
    if (std::isnan(x)) {
      ASSERT_TRUE(is_nan16(h, f)) << x;
      continue;
    }
    ASSERT_EQ(double(to_fp32(h)), reference_round(x, f)) << std::hexfloat << x;
  }
}

}  // namespace

TEST(CastBf16, EveryPatternRoundTrips) {
  expect_all_patterns_round_trip(kBf16, bf16_to_fp32, fp32_to_bf16);
}
TEST(CastFp16, EveryPatternRoundTrips) {
  expect_all_patterns_round_trip(kFp16, fp16_to_fp32, fp32_to_fp16);
}
TEST(CastBf16, TiesGoToEven) { expect_ties_to_even(kBf16, bf16_to_fp32, fp32_to_bf16); }
TEST(CastFp16, TiesGoToEven) { expect_ties_to_even(kFp16, fp16_to_fp32, fp32_to_fp16); }
TEST(CastBf16, RoundsAsDoubleReference) {
  expect_matches_reference(kBf16, bf16_to_fp32, fp32_to_bf16);
}
TEST(CastFp16, RoundsAsDoubleReference) {
  expect_matches_reference(kFp16, fp16_to_fp32, fp32_to_fp16);
}

TEST(CastFp16, DecodesAsFormula) {
  // A finite half is (-1)^s * 2^(e-15) * 1.m (normal) or 2^-14 * 0.m.
  for (uint32_t h = 0; h <= 0xffff; h++) {
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0x1f) continue;
    const double mag = e ? std::ldexp(1.0 + m / 1024.0, e - 15) : std::ldexp(m / 1024.0, -14);
    ASSERT_EQ(double(fp16_to_fp32(uint16_t(h))), (h & 0x8000) ? -mag : mag) << std::hex << h;
  }
  EXPECT_EQ(fp16_to_fp32(0x7c00), INFINITY);
  EXPECT_EQ(fp16_to_fp32(0xfc00), -INFINITY);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(1e6f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);
}

// The buffer casts (threaded, hardware fp16 conversion on AVX-512, a scalar
// tail) give the scalar forms' bits on every value, NaNs included.
TEST(Cast, BuffersMatchScalar) {
  std::vector<float> x = spread_fp32();  // (n) n not a multiple of 16
  x.pop_back();
  const int64_t n = int64_t(x.size());
  std::vector<uint16_t> b(n), h(n);  // (n) bf16, (n) fp16
  std::vector<float> bf(n), hf(n);   // (n) each decoded back
  cast_fp32_to_bf16(b.data(), x.data(), n);
  cast_fp32_to_fp16(h.data(), x.data(), n);
  cast_bf16_to_fp32(bf.data(), b.data(), n);
  cast_fp16_to_fp32(hf.data(), h.data(), n);
  for (int64_t i = 0; i < n; i++) {
    ASSERT_EQ(b[i], fp32_to_bf16(x[i])) << i;
    ASSERT_EQ(h[i], fp32_to_fp16(x[i])) << i;
    ASSERT_EQ(std::bit_cast<uint32_t>(bf[i]), std::bit_cast<uint32_t>(bf16_to_fp32(b[i]))) << i;
    ASSERT_EQ(std::bit_cast<uint32_t>(hf[i]), std::bit_cast<uint32_t>(fp16_to_fp32(h[i]))) << i;
  }
  // Every fp16 pattern through the hardware decode, and back.
  std::vector<uint16_t> all(65536), again(65536);  // (65536)
  std::vector<float> dec(65536);                   // (65536)
  for (uint32_t i = 0; i < 65536; i++) all[i] = uint16_t(i);
  cast_fp16_to_fp32(dec.data(), all.data(), 65536);
  cast_fp32_to_fp16(again.data(), dec.data(), 65536);
  for (uint32_t i = 0; i < 65536; i++) {
    ASSERT_EQ(std::bit_cast<uint32_t>(dec[i]), std::bit_cast<uint32_t>(fp16_to_fp32(all[i]))) << i;
    ASSERT_EQ(again[i], fp32_to_fp16(dec[i])) << i;
  }
}

// The kernels' per-element fp16 policy (storage.h: the F16C instructions
// where the CPU has them) gives the scalar forms' bits on every half and on
// the spread of floats, NaNs included.
TEST(Cast, StorageFp16MatchesScalar) {
  for (uint32_t i = 0; i < 65536; i++) {
    const float f = StoreFp16::load(uint16_t(i));
    ASSERT_EQ(std::bit_cast<uint32_t>(f), std::bit_cast<uint32_t>(fp16_to_fp32(uint16_t(i)))) << i;
  }
  for (float x : spread_fp32()) ASSERT_EQ(StoreFp16::store(x), fp32_to_fp16(x)) << x;
}

TEST(Cast, AnyNonfiniteFindsEachKindAnywhere) {
  std::vector<float> g(100003, 1.5f);  // (n) gradients, above the threading size
  EXPECT_FALSE(any_nonfinite(g.data(), int64_t(g.size())));
  EXPECT_FALSE(any_nonfinite(g.data(), 0));
  g[7] = 3.4e38f;  // the largest floats are finite
  EXPECT_FALSE(any_nonfinite(g.data(), int64_t(g.size())));
  for (float bad : {INFINITY, -INFINITY, NAN, -NAN}) {
    for (size_t at : {size_t(0), size_t(50000), g.size() - 1}) {
      const float keep = g[at];
      g[at] = bad;
      EXPECT_TRUE(any_nonfinite(g.data(), int64_t(g.size()))) << bad << " at " << at;
      g[at] = keep;
    }
  }
}

// Conversions between fp32 and the 16-bit formats (bf16, IEEE fp16), and the
// non-finite check that dynamic loss scaling runs on the gradients.
//
// Rounding is round-to-nearest-even everywhere, as PyTorch and oneDNN do, so
// a value stored in 16 bits here is the value they would store. NaN stays
// NaN (quietened, sign and top payload bits kept): a NaN must never round to
// inf or to a number, or the overflow check after it would miss it.
//
// The scalar forms are inline so the buffer loops vectorise; the buffer forms
// are the ones to call on tensors (threaded above a size where it pays).
#pragma once
#include <bit>
#include <cstdint>

#include "tessera/core/bf16.h"
#include "tessera/core/dtype.h"

namespace tessera::cpu {

// bf16 <-> fp32: core/bf16.h (the communication layer sums bf16 too).
using tessera::bf16_to_fp32;
using tessera::fp32_to_bf16;

inline float fp16_to_fp32(fp16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f)  // inf, or NaN made quiet with its payload kept
    return std::bit_cast<float>(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0u));
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in fp32
    const float mag = float(man) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(mag));
  }
  // Normal: rebias the exponent from 15 to 127.
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

inline fp16_t fp32_to_fp16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return fp16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  // 65520 is halfway between the largest half (65504, odd mantissa) and 2^16,
  // so it and everything above round to inf.
  if (a >= 0x477ff000u) return fp16_t(sign | 0x7c00u);
  if (a >= 0x38800000u) {  // >= 2^-14: a normal half
    const uint32_t r = a - (112u << 23);  // rebias 127 -> 15
    return fp16_t(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
  }
  // Below 2^-14: a multiple of 2^-24 (a subnormal half). 2^-25 is a tie
  // between 0 and 2^-24 and goes to the even one, 0.
  if (a <= 0x33000000u) return fp16_t(sign);
  const uint32_t exp = a >> 23, man = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exp;  // 14..24: man >> shift counts 2^-24 units
  uint32_t q = man >> shift;
  const uint32_t rem = man & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) q++;  // may carry into the smallest normal
  return fp16_t(sign | q);
}

// out (n) = in (n) converted; in and out must not overlap.
void cast_fp32_to_bf16(bf16_t* out, const float* in, int64_t n);
void cast_bf16_to_fp32(float* out, const bf16_t* in, int64_t n);
void cast_fp32_to_fp16(fp16_t* out, const float* in, int64_t n);
void cast_fp16_to_fp32(float* out, const fp16_t* in, int64_t n);

// True when any of x (n) is inf or NaN: the overflow test of loss scaling.
bool any_nonfinite(const float* x, int64_t n);

}  // namespace tessera::cpu

// The fp32 <-> bf16 scalar conversions, in core so that every layer can use
// them: the kernels' casts (kernels/cpu/cast.h) and the communication
// layer's bf16 sums (comm/, which may not include kernels/).
//
// Rounding is round-to-nearest-even, as PyTorch and oneDNN do. NaN stays NaN
// (quietened, sign and top payload bits kept): a NaN must never round to inf
// or to a number, or the overflow check after it would miss it.
#pragma once
#include <bit>
#include <cstdint>

#include "tessera/core/dtype.h"

namespace tessera {

inline float bf16_to_fp32(bf16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

inline bf16_t fp32_to_bf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  // NaN: truncating could clear every payload bit left and give inf; set the
  // quiet bit instead.
  const uint32_t nan = (u >> 16) | 0x0040u;
  // Round to nearest even on the 16 dropped bits: add just under half, plus
  // one when the kept part is odd. A finite value past the largest bf16
  // carries into the exponent and becomes inf, as it should.
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return bf16_t((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

}  // namespace tessera

// How a kernel reads and writes one element of a buffer in a given storage
// format: fp32 (the reference), bf16 or fp16 (16-bit bit patterns). Kernels
// that store activations in the low precision (--bf16 / --fp16) are written
// once as templates over these policies and compute in fp32 in between;
// the fp32 instantiation is the plain fp32 kernel (load and store are the
// identity), so the reference path keeps its exact arithmetic.
#pragma once
#include "tessera/core/dtype.h"
#include "tessera/kernels/cpu/cast.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace tessera::cpu {

struct StoreF32 {
  using T = float;
  static float load(float x) { return x; }
  static float store(float x) { return x; }
};
struct StoreBf16 {
  using T = bf16_t;
  static float load(bf16_t x) { return bf16_to_fp32(x); }
  static bf16_t store(float x) { return fp32_to_bf16(x); }  // round to nearest even
};
// With F16C (every AVX2 CPU, and AVX-512 ones) the one-element hardware
// conversions: the compiler vectorises loops of them into VCVTPH2PS /
// VCVTPS2PH, where the branchy scalar forms (subnormals, overflow) stay
// scalar. Same bits (tests/kernels/test_cast): round to nearest even from
// the immediate.
struct StoreFp16 {
  using T = fp16_t;
#if defined(__F16C__)
  static float load(fp16_t x) { return _cvtsh_ss(x); }
  static fp16_t store(float x) {
    return fp16_t(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#else
  static float load(fp16_t x) { return fp16_to_fp32(x); }
  static fp16_t store(float x) { return fp32_to_fp16(x); }  // round to nearest even
#endif
};

}  // namespace tessera::cpu

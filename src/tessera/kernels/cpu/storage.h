// How a kernel reads and writes one element of a buffer in a given storage
// format: fp32 (the reference), bf16 or fp16 (16-bit bit patterns). Kernels
// that store activations in the low precision (--bf16 / --fp16) are written
// once as templates over these policies and compute in fp32 in between;
// the fp32 instantiation is the plain fp32 kernel (load and store are the
// identity), so the reference path keeps its exact arithmetic.
#pragma once
#include "tessera/core/dtype.h"
#include "tessera/kernels/cpu/cast.h"

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
struct StoreFp16 {
  using T = fp16_t;
  static float load(fp16_t x) { return fp16_to_fp32(x); }
  static fp16_t store(float x) { return fp32_to_fp16(x); }  // round to nearest even
};

}  // namespace tessera::cpu

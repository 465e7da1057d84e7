// Sixteen floats as one value (one AVX-512 register, two AVX2 ones), for
// register-blocked tile loops written with GCC's vector extension rather
// than intrinsics, so they build for any -march.
//
// Why `pin`: where several FMAs read the same loaded vector, GCC folds the
// load into each FMA as a memory operand (it counts that as free). On this
// project's Zen 5 host a 512-bit memory operand per FMA halves the FMA rate:
// attention's 4 x 64 score block ran at 86 GFLOP/s per core that way and at
// 221 with the operand loaded once into a register (bench/bench_attention.cpp
// measures the kernels). The empty asm makes the value opaque to the
// optimiser, so it stays in the register it was loaded into. It changes no
// arithmetic: every product and sum is the one the scalar loop would form.
#pragma once
#include <cstring>

namespace tessera::cpu {

using vf16 = float __attribute__((vector_size(64)));  // (16) floats

inline vf16 load16(const float* p) {  // p: any alignment
  vf16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store16(float* p, vf16 v) { std::memcpy(p, &v, sizeof v); }

// Keeps v in a register (see above); a no-op where a vf16 is not one
// register (no AVX-512).
inline void pin(vf16& v) {
#if defined(__AVX512F__)
  asm("" : "+v"(v));
#else
  (void)v;
#endif
}

}  // namespace tessera::cpu

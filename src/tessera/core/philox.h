// Philox4x32-10, the counter-based generator of Salmon, Moraes, Dror and
// Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3" (SC'11): a 128-bit
// counter and a 64-bit key give 128 random bits through ten rounds of
// multiply-and-xor, with no state. Dropout masks use it because any element
// of any mask is a pure function of where the element is (see
// kernels/cpu/dropout.h), so every layout, every thread split and every
// recomputation draws the same bits as one process, and nothing is stored.
// (core/rng.h's splitmix64 serves initialisation and sampling; Philox is the
// generator of the published dropout implementations, statistically vetted
// by BigCrush, and four words per call suit a mask over consecutive elements.)
#pragma once
#include <cstdint>

namespace tessera {

struct Philox4x32 {
  uint32_t c[4];  // counter
};

namespace philox_detail {
constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;  // round multipliers (SC'11, Table 2)
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;  // key schedule: golden ratio, sqrt(3)-1
}  // namespace philox_detail

// Ten rounds on counter ctr under key (k0, k1); returns the four output words.
// Written on plain uint32/uint64 arithmetic so a loop over counters vectorises.
inline Philox4x32 philox4x32_10(Philox4x32 ctr, uint32_t k0, uint32_t k1) {
  using namespace philox_detail;
  uint32_t x0 = ctr.c[0], x1 = ctr.c[1], x2 = ctr.c[2], x3 = ctr.c[3];
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kMul0) * x0;  // hi/lo halves of the two products
    const uint64_t p1 = uint64_t(kMul1) * x2;
    const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    const uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    x0 = hi1 ^ x1 ^ k0;
    x1 = lo1;
    x2 = hi0 ^ x3 ^ k1;
    x3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {{x0, x1, x2, x3}};
}

}  // namespace tessera

// Arithmetic on sizes and offsets that come from files. A file can say
// anything (a row count of 2^58 + 8, a start of INT64_MAX), and a product or
// sum that wraps turns into a small allocation or a passing bounds check that
// is then overrun. These refuse to wrap: each throws tessera::Error naming
// `what` instead.
#pragma once
#include <cstdint>
#include <span>

#include "tessera/core/error.h"

namespace tessera {

inline int64_t checked_add(int64_t a, int64_t b, const char* what) {
  int64_t r;
  TESSERA_CHECK(!__builtin_add_overflow(a, b, &r), "{}: size overflows ({} + {})", what, a, b);
  return r;
}

inline int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t r;
  TESSERA_CHECK(!__builtin_mul_overflow(a, b, &r), "{}: size overflows ({} x {})", what, a, b);
  return r;
}

inline uint64_t checked_add_u64(uint64_t a, uint64_t b, const char* what) {
  uint64_t r;
  TESSERA_CHECK(!__builtin_add_overflow(a, b, &r), "{}: size overflows ({} + {})", what, a, b);
  return r;
}

inline uint64_t checked_mul_u64(uint64_t a, uint64_t b, const char* what) {
  uint64_t r;
  TESSERA_CHECK(!__builtin_mul_overflow(a, b, &r), "{}: size overflows ({} x {})", what, a, b);
  return r;
}

// Product of dims, each of which must be >= 0, without wrapping.
inline int64_t checked_numel(std::span<const int64_t> dims, const char* what) {
  int64_t n = 1;
  for (int64_t d : dims) {
    TESSERA_CHECK(d >= 0, "{}: negative dimension {}", what, d);
    n = checked_mul(n, d, what);
  }
  return n;
}

// [start, start + count) lies inside [0, limit), for values read from a
// file: written as count <= limit - start, which cannot overflow.
inline bool range_inside(int64_t start, int64_t count, int64_t limit) {
  return start >= 0 && count >= 0 && start <= limit && count <= limit - start;
}

}  // namespace tessera

// Shape: the extents of a tensor (at most 4 dims). Storage is owned by flat
// buffers (parameters, gradients, optimizer state, activation arenas); a
// parameter is an offset and a Shape in one of them, so sharding is offset
// arithmetic.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "tessera/core/error.h"

namespace tessera {

struct Shape {
  static constexpr int kMaxDims = 4;
  std::array<int64_t, kMaxDims> dims{};
  int ndim = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d) {
    TESSERA_CHECK(d.size() <= kMaxDims, "Shape: at most {} dims", kMaxDims);
    for (int64_t x : d) dims[ndim++] = x;
  }
  int64_t operator[](int i) const { return dims[i]; }
  int64_t& operator[](int i) { return dims[i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= dims[i];
    return n;
  }
  bool operator==(const Shape& o) const {
    if (ndim != o.ndim) return false;
    for (int i = 0; i < ndim; ++i)
      if (dims[i] != o.dims[i]) return false;
    return true;
  }
  std::string str() const {
    std::string s = "(";
    for (int i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + ")";
  }
};

}  // namespace tessera

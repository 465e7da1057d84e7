// KV cache for decoding one sequence: every layer's keys and values of the
// positions seen so far, so a new token attends over them without
// recomputing the prefix.
#pragma once
#include <cstdint>

#include "tessera/core/buffer.h"

namespace tessera {

struct KVCache {
  // width: the key (and value) row of one position, KVH * hs (C for GPT-2's
  // multi-head attention; less under grouped-query attention).
  int64_t layers = 0, max_T = 0, width = 0;
  int64_t len = 0;  // positions filled (the same in every layer)
  Buffer k, v;      // (layers, max_T, width) each; row t of layer l is position t

  void init(int64_t layers, int64_t max_T, int64_t width);
  void reset() { len = 0; }
  float* keys(int64_t layer) const { return k.f32() + layer * max_T * width; }    // (max_T, width)
  float* values(int64_t layer) const { return v.f32() + layer * max_T * width; }  // (max_T, width)
};

}  // namespace tessera

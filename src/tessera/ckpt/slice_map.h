// Where a rank's slice of a tensor sits in the global tensor — the piece of
// checkpoint metadata that lets a file written under one layout be read
// under another.
//
// A slice is a list of blocks (rectangles of the global tensor); the rank's
// local tensor, flattened row-major, is the blocks one after another, each
// flattened row-major. That covers every split ParamLayout makes:
//   replicated             one block, the whole tensor
//   row split (dim 1)      one block (rows, cols/tp) at column tp_rank*cols/tp
//   column/vocab (dim 0)   one block (rows/tp, cols) at row tp_rank*rows/tp
//   QKV (3 parts), SwiGLU fc (2)  a block in each part (q, k, v; gate, up)
//   expert stack over ep   the above within the rank's experts (dim 0)
// A ZeRO shard is a flat range [lo, hi) of the local slice on top of this.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/core/shape.h"
#include "tessera/model/param_layout.h"

namespace tessera::ckpt {

struct Block {
  Shape start;  // first global coordinate per dim
  Shape shape;  // extent per dim
};

struct SliceMap {
  Shape global;               // the whole tensor
  std::vector<Block> blocks;  // in local order

  int64_t numel() const;  // elements of the local slice

  // Calls fn(local, global, count) for the maximal runs of local elements
  // [lo, hi) that are also contiguous in the global tensor (row pieces),
  // in local order. `local` and `global` are flat indices.
  void for_each_run(int64_t lo, int64_t hi,
                    const std::function<void(int64_t, int64_t, int64_t)>& fn) const;
};

// The slice `layout` holds of entry `e`.
SliceMap slice_of(const ParamLayout& layout, const ParamEntry& e);

nlohmann::json slice_to_json(const SliceMap& s);  // {"blocks": [{"start": [...], "shape": [...]}]}
SliceMap slice_from_json(const Shape& global, const nlohmann::json& j);

nlohmann::json shape_to_json(const Shape& s);
Shape shape_from_json(const nlohmann::json& j);

}  // namespace tessera::ckpt

#include "tessera/ckpt/slice_map.h"

#include <algorithm>

#include "tessera/core/checked_math.h"
#include "tessera/core/error.h"

namespace tessera::ckpt {

using nlohmann::json;

int64_t SliceMap::numel() const {
  // Blocks read from a file are checked against `global` (slice_from_json),
  // whose size is checked too, but their sum can still exceed it.
  int64_t n = 0;
  for (const Block& b : blocks) n = checked_add(n, b.shape.numel(), "checkpoint slice");
  return n;
}

void SliceMap::for_each_run(int64_t lo, int64_t hi,
                            const std::function<void(int64_t, int64_t, int64_t)>& fn) const {
  // Global row-major strides.
  int64_t gstride[Shape::kMaxDims];
  for (int d = global.ndim - 1, s = 1; d >= 0; --d) {
    gstride[d] = s;
    s *= global[d];
  }
  int64_t base = 0;  // local index of the block's first element
  for (const Block& b : blocks) {
    const int64_t n = b.shape.numel();
    const int64_t a = std::max(lo, base), z = std::min(hi, base + n);
    if (a < z) {
      // A run is (part of) one row of the block along its last dim.
      const int last = b.shape.ndim - 1;
      const int64_t row = last >= 0 ? b.shape[last] : 1;
      for (int64_t i = a - base; i < z - base;) {
        const int64_t in_row = i % row, count = std::min(row - in_row, z - base - i);
        // Block coordinates of element i, then its global flat index.
        int64_t rem = i, g = 0;
        for (int d = b.shape.ndim - 1; d >= 0; --d) {
          g += (b.start[d] + rem % b.shape[d]) * gstride[d];
          rem /= b.shape[d];
        }
        fn(base + i, g, count);
        i += count;
      }
    }
    base += n;
  }
}

SliceMap slice_of(const ParamLayout& layout, const ParamEntry& e) {
  SliceMap s;
  s.global = e.global_shape;
  // An expert stack split over ep holds experts [expert_begin, + E / ep):
  // every block lies within them (dim 0 from expert_begin, E / ep long).
  Block whole;
  whole.start = e.global_shape;
  for (int d = 0; d < whole.start.ndim; ++d) whole.start[d] = 0;
  whole.shape = e.global_shape;
  if (e.ep_split) {
    whole.start[0] = e.expert_begin;
    whole.shape[0] = e.local_shape[0];
  }
  if (e.split == TpSplit::None || layout.tp() == 1) {
    s.blocks.push_back(whole);
    return s;
  }
  const int d = e.split_dim();
  if (e.split != TpSplit::Row) {
    // The split dim is parts (ParamEntry::split_parts), each split over tp
    // on its own (dim 0, or dim 1 of an expert stack). The local buffer
    // holds this rank's slice of each part in turn, per expert of a stack
    // (ParamEntry::lead): one block per (expert, part) when there are
    // several parts, else one block for the whole (local) stack.
    TESSERA_CHECK(e.lead <= 1, "parameter {}: at most one leading dim", e.name);
    const int64_t outer = e.lead == 1 && e.part_count() > 1 ? e.local_shape[0] : 1;
    for (int64_t i = 0; i < outer; ++i)
      for (int64_t j = 0; j < e.part_count(); ++j) {
        const int64_t local_part = e.part_rows(j) / layout.tp();
        Block b = whole;
        if (outer > 1) {
          b.start[0] = whole.start[0] + i;
          b.shape[0] = 1;
        }
        b.start[d] = e.part_begin(j) + layout.tp_rank() * local_part;
        b.shape[d] = local_part;
        s.blocks.push_back(b);
      }
  } else {
    Block b = whole;
    b.start[d] = layout.tp_rank() * e.local_shape[d];
    b.shape[d] = e.local_shape[d];
    s.blocks.push_back(b);
  }
  return s;
}

json shape_to_json(const Shape& s) {
  json j = json::array();
  for (int i = 0; i < s.ndim; ++i) j.push_back(s[i]);
  return j;
}

Shape shape_from_json(const json& j) {
  TESSERA_CHECK(j.is_array() && j.size() <= size_t(Shape::kMaxDims), "bad shape {}", j.dump());
  Shape s;
  for (const auto& x : j) {
    TESSERA_CHECK(x.is_number_integer() && x.get<int64_t>() >= 0, "bad shape {}", j.dump());
    s.dims[s.ndim++] = x.get<int64_t>();
  }
  // Every stride and flat index of the tensor is then an int64 that cannot wrap.
  checked_numel(std::span<const int64_t>(s.dims.data(), size_t(s.ndim)), "checkpoint tensor shape");
  return s;
}

json slice_to_json(const SliceMap& s) {
  json blocks = json::array();
  for (const Block& b : s.blocks)
    blocks.push_back({{"start", shape_to_json(b.start)}, {"shape", shape_to_json(b.shape)}});
  return {{"blocks", blocks}};
}

SliceMap slice_from_json(const Shape& global, const json& j) {
  SliceMap s;
  s.global = global;
  TESSERA_CHECK(j.is_object() && j.contains("blocks") && j["blocks"].is_array(),
                "slice of a tensor {} has no block list", global.str());
  for (const auto& jb : j.at("blocks")) {
    Block b{shape_from_json(jb.at("start")), shape_from_json(jb.at("shape"))};
    TESSERA_CHECK(b.start.ndim == global.ndim && b.shape.ndim == global.ndim,
                  "slice block rank differs from the tensor's {}", global.str());
    for (int d = 0; d < global.ndim; ++d)
      TESSERA_CHECK(range_inside(b.start[d], b.shape[d], global[d]),
                    "slice block outside the tensor {}", global.str());
    s.blocks.push_back(b);
  }
  return s;
}

}  // namespace tessera::ckpt

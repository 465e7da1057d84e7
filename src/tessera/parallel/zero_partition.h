// ZeroPartition: which elements of the flat parameter buffer a data-parallel
// rank owns under ZeRO. Every unit of the layout (embeddings, each layer,
// final norm; each a multiple of dp long) is cut into dp equal slices and
// rank r owns slice r of each. The rank's shard stores its slices back to
// back, so slice r of unit u sits at shard offset u.begin / dp.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/model/param_layout.h"
#include "tessera/optim/adamw.h"

namespace tessera {

class ZeroPartition {
 public:
  ZeroPartition(const ParamLayout& layout, int64_t dp, int64_t dp_rank);

  int64_t dp() const { return dp_; }
  int64_t dp_rank() const { return rank_; }
  // This rank's slice of every unit, in unit order.
  const std::vector<FlatSegment>& segments() const { return segments_; }
  const FlatSegment& segment(size_t unit) const { return segments_[unit]; }
  // Elements of the rank's shard: layout.numel() / dp.
  int64_t shard_numel() const { return shard_numel_; }

 private:
  int64_t dp_, rank_, shard_numel_ = 0;
  std::vector<FlatSegment> segments_;
};

}  // namespace tessera

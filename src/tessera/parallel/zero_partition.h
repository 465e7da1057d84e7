// ZeroPartition: which elements of the flat parameter buffer a data-parallel
// rank owns under ZeRO. Every unit of the layout (embeddings, each layer,
// final norm; each a multiple of dp long) is cut into equal slices, one per
// rank of the unit's group, and the rank owns its slice of each: dp x cp
// slices of a dense unit, expert-data-parallel (dp x cp / ep) slices of an
// MoE layer's expert unit (ParamUnit::expert; the ranks holding the same
// experts). The rank's shard stores its slices back to back in unit order.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/model/param_layout.h"
#include "tessera/optim/adamw.h"

namespace tessera {

class ZeroPartition {
 public:
  // dp ranks for dense units (this one dp_rank); expert_dp ranks for expert
  // units (this one expert_dp_rank). Without expert parallelism the two
  // groups are one: expert_dp = dp.
  ZeroPartition(const ParamLayout& layout, int64_t dp, int64_t dp_rank, int64_t expert_dp,
                int64_t expert_dp_rank);

  int64_t dp() const { return dp_; }
  int64_t dp_rank() const { return rank_; }
  // Slices of unit u: dp, or expert_dp for an expert unit.
  int64_t slices(size_t unit) const { return slices_[unit]; }
  // This rank's slice of every unit, in unit order.
  const std::vector<FlatSegment>& segments() const { return segments_; }
  const FlatSegment& segment(size_t unit) const { return segments_[unit]; }
  // Elements of the rank's shard: the sum of its slices.
  int64_t shard_numel() const { return shard_numel_; }

 private:
  int64_t dp_, rank_, shard_numel_ = 0;
  std::vector<int64_t> slices_;
  std::vector<FlatSegment> segments_;
};

}  // namespace tessera

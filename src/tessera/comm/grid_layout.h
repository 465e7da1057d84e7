// GridLayout: where each global rank sits in the tp x dp x pp grid. Pure
// arithmetic, no MPI, so the planner and the tests use it directly.
//
// Megatron's order: tp fastest, then dp, then pp,
//   global rank = pp_rank * (dp * tp) + dp_rank * tp + tp_rank,
// so a tp group is tp consecutive ranks (one node, the fast links) and a
// pipeline stage is a contiguous block of dp * tp ranks.
#pragma once
#include <string>
#include <vector>

#include "tessera/config/parallel_config.h"

namespace tessera::comm {

struct GridCoord {
  int tp = 0;
  int dp = 0;
  int pp = 0;
  bool operator==(const GridCoord&) const = default;
};

struct GridLayout {
  int world = 1;
  int tp = 1;
  int pp = 1;
  int dp = 1;

  // The grid of `par`'s degrees over `world` ranks. Validates them with
  // ParallelConfig::validate_degrees (a tessera::Error naming the flags).
  static GridLayout make(const ParallelConfig& par, int world);

  int rank_of(GridCoord c) const { return c.pp * (dp * tp) + c.dp * tp + c.tp; }
  GridCoord coord_of(int rank) const { return {rank % tp, (rank / tp) % dp, rank / (tp * dp)}; }

  // Members of each group containing `rank`, in group-rank order.
  std::vector<int> tp_group(int rank) const;
  std::vector<int> dp_group(int rank) const;
  std::vector<int> pp_group(int rank) const;
  // First and last pipeline stage of rank's (tp, dp) column: the ranks holding
  // the input embedding and the tied output head. Empty if `rank` is in
  // neither stage. With pp == 1 it is the rank alone.
  std::vector<int> embedding_group(int rank) const;
  bool in_embedding_group(int rank) const;
};

// The table rank 0 prints at start: one line per global rank.
std::string format_layout_table(const GridLayout& layout);

}  // namespace tessera::comm

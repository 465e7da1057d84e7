// GridLayout: where each global rank sits in the tp x cp x dp x pp grid.
// Pure arithmetic, no MPI, so the planner and the tests use it directly.
//
// Megatron's order: tp fastest, then cp, then dp, then pp,
//   global rank = ((pp_rank * dp + dp_rank) * cp + cp_rank) * tp + tp_rank,
// so a tp group is tp consecutive ranks (one node, the fast links), a cp
// ring the next-nearest, and a pipeline stage a contiguous block of
// dp * cp * tp ranks. Without context parallelism (cp = 1) this is the
// tp, dp, pp order it always was.
#pragma once
#include <string>
#include <vector>

#include "tessera/config/parallel_config.h"

namespace tessera::comm {

struct GridCoord {
  int tp = 0;
  int dp = 0;
  int pp = 0;
  int cp = 0;  // last, so that {tp, dp, pp} still names a cp = 1 coordinate
  bool operator==(const GridCoord&) const = default;
};

struct GridLayout {
  int world = 1;
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int cp = 1;
  // Expert-parallel ranks, carved out of the dp x cp ranks (ep divides
  // dp x cp). Last, so that the aggregates above still read as before.
  int ep = 1;

  // The grid of `par`'s degrees over `world` ranks. Validates them with
  // ParallelConfig::validate_degrees (a tessera::Error naming the flags).
  static GridLayout make(const ParallelConfig& par, int world);

  int rank_of(GridCoord c) const { return ((c.pp * dp + c.dp) * cp + c.cp) * tp + c.tp; }
  GridCoord coord_of(int rank) const {
    return {rank % tp, (rank / (tp * cp)) % dp, rank / (tp * cp * dp), (rank / tp) % cp};
  }

  // Members of each group containing `rank`, in group-rank order.
  std::vector<int> tp_group(int rank) const;
  std::vector<int> dp_group(int rank) const;
  std::vector<int> pp_group(int rank) const;
  // The context-parallel ring (cp ranks sharing every sequence), and the
  // dp x cp ranks that reduce gradients and shard ZeRO state together
  // (each cp rank saw part of every sequence), dp-major: cp rank c of dp
  // rank d is member d * cp + c. With cp = 1 the latter is dp_group.
  std::vector<int> cp_group(int rank) const;
  std::vector<int> dp_cp_group(int rank) const;
  // Expert parallelism splits the dp x cp group (the order above, member m)
  // as Megatron-Core does, expert-parallel fastest: the expert-parallel
  // group is the ep consecutive members m / ep (they exchange tokens every
  // MoE layer, so they are the nearest), its rank m % ep; the expert-data-
  // parallel group is the dp x cp / ep members with the same m % ep (they
  // hold the same experts and reduce their gradients), its rank m / ep.
  // With ep = 1 the former is the rank alone and the latter dp_cp_group.
  int dp_cp_index(int rank) const {
    const GridCoord c = coord_of(rank);
    return c.dp * cp + c.cp;
  }
  std::vector<int> ep_group(int rank) const;
  std::vector<int> expert_dp_group(int rank) const;
  // First and last pipeline stage of rank's (tp, dp) column: the ranks holding
  // the input embedding and the tied output head. Empty if `rank` is in
  // neither stage. With pp == 1 it is the rank alone.
  std::vector<int> embedding_group(int rank) const;
  bool in_embedding_group(int rank) const;
};

// The table rank 0 prints at start: one line per global rank.
std::string format_layout_table(const GridLayout& layout);

}  // namespace tessera::comm

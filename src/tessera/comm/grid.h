// Grid: this rank's tp, cp, dp, pp, ep and embedding groups, split from the world by
// GridLayout's arithmetic. Built once at start (collective over the world)
// and passed to whatever needs a group; the Grid owns the groups.
#pragma once
#include <memory>

#include "tessera/comm/communicator.h"
#include "tessera/comm/grid_layout.h"

namespace tessera::comm {

class Grid {
 public:
  // Collective over `world`. Every rank validates the same layout first, so a
  // bad one throws the same tessera::Error on all ranks before any split.
  Grid(Communicator& world, const ParallelConfig& par);

  const GridLayout& layout() const { return layout_; }
  GridCoord coord() const { return coord_; }
  int world_rank() const { return world_rank_; }
  bool is_first_stage() const { return coord_.pp == 0; }
  bool is_last_stage() const { return coord_.pp == layout_.pp - 1; }

  Communicator& tp() const { return *tp_; }
  Communicator& dp() const { return *dp_; }
  Communicator& pp() const { return *pp_; }
  // The context-parallel ring; null without context parallelism (cp = 1),
  // so a run without it splits no more communicators than before.
  Communicator* cp() const { return cp_.get(); }
  // The ranks that reduce gradients and shard ZeRO state together: dp x cp
  // (dp_cp_group's order); the dp group itself when cp = 1.
  Communicator& dp_cp() const { return dp_cp_ ? *dp_cp_ : *dp_; }
  // Expert parallelism (GridLayout::ep_group): the ranks that exchange an
  // MoE layer's tokens, null when ep = 1 (nothing is split then); and the
  // ranks holding the same experts, which reduce their gradients and shard
  // their ZeRO state: dp_cp() itself when ep = 1.
  Communicator* ep() const { return ep_.get(); }
  Communicator& expert_dp() const { return expert_dp_ ? *expert_dp_ : dp_cp(); }
  // Null on ranks in neither the first nor the last stage.
  Communicator* embedding() const { return embedding_.get(); }

 private:
  GridLayout layout_;
  int world_rank_ = 0;
  GridCoord coord_;
  std::unique_ptr<Communicator> tp_, dp_, pp_, embedding_, cp_, dp_cp_, ep_, expert_dp_;
};

}  // namespace tessera::comm

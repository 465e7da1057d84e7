// Communication costs: alpha-beta per collective algorithm (ring, tree,
// hierarchical), on the network tier a group's ranks span.
//
// Ranks follow Megatron's order (tp fastest, then dp, then pp; see
// comm/grid_layout.h), so a group is `size` ranks `stride` apart: tp groups
// stride 1, dp groups stride tp, pp neighbours stride tp*dp.
#pragma once
#include <cstdint>
#include <string>

#include "tessera/plan/system.h"

namespace tessera::plan {

enum class Collective { AllReduce, ReduceScatter, AllGather, SendRecv };

struct CommCost {
  double seconds = 0;
  const char* algorithm = "none";  // ring | tree | hierarchical | p2p | none
  const NetworkTier* tier = nullptr;
};

// The slowest tier a group of `size` ranks `stride` apart must cross.
const NetworkTier& group_tier(const SystemSpec& sys, int64_t size, int64_t stride);

// Time of one collective over `bytes` (the full buffer: each rank's input
// for all-reduce and reduce-scatter, each rank's output for all-gather, the
// message for send/recv). Picks the fastest algorithm, as NCCL/RCCL's tuner does:
//   ring all-reduce        2(n-1) a + 2 (n-1)/n S/b       (Patarasuk & Yuan 2009)
//   ring reduce-scatter /
//        all-gather        (n-1) a + (n-1)/n S/b
//   tree all-reduce        2 log2(n) a + 2 S/b            (pipelined binary trees)
//   hierarchical           reduce-scatter in the node, all-reduce of S/k
//                          across nodes, all-gather in the node (k ranks/node)
CommCost collective_cost(const SystemSpec& sys, Collective op, double bytes, int64_t size,
                         int64_t stride);

}  // namespace tessera::plan

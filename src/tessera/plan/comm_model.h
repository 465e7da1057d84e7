// Communication costs: alpha-beta per collective algorithm (ring, tree,
// hierarchical), on the network tier a group's ranks span.
//
// Ranks follow Megatron's order (tp fastest, then dp, then pp; see
// comm/grid_layout.h), so a group is `size` ranks `stride` apart: tp groups
// stride 1, dp groups stride tp, pp neighbours stride tp*dp.
#pragma once
#include <cstdint>
#include <string>

#include "tessera/comm/comm_op.h"
#include "tessera/plan/system.h"

namespace tessera::plan {

// The engine's own names for what is priced: all_reduce, reduce_scatter,
// all_gather, and send / recv (either: the pair between two pipeline
// stages). Broadcast and barrier are not priced.
using comm::CommOp;

struct CommCost {
  double seconds = 0;
  const char* algorithm = "none";  // ring | tree | hierarchical | p2p | none
  const NetworkTier* tier = nullptr;
};

// The slowest tier a group of `size` ranks `stride` apart must cross, in a
// job of `world` ranks where every rank belongs to one such group. A tier
// serves the collective only if EVERY group lies inside one of its blocks:
// the groups run in lockstep, so one that straddles two nodes sets the pace
// (tp 6 on 8-device nodes: ranks 6-11 span nodes 0 and 1). For send/recv,
// `size` is 2 and the pairs are every (r, r + stride), as between
// neighbouring pipeline stages. world 0: the job is this one group, its
// first rank aligned to a block.
const NetworkTier& group_tier(const SystemSpec& sys, CommOp op, int64_t size, int64_t stride,
                              int64_t world = 0);

// The ring algorithm's two terms over `n` ranks of tier `t`, before the
// tier's measured collective factor scales the bandwidth term (system.h):
//   all-reduce 2(n-1) a and 2 (n-1)/n S/b; reduce-scatter, all-gather
//   (n-1) a and (n-1)/n S/b; send/recv a and S/b.
// `tessera calibrate` divides a measured collective by them to get the factor.
struct RingTerms {
  double latency = 0;    // seconds
  double bandwidth = 0;  // seconds
};
RingTerms ring_terms(CommOp op, double bytes, double n, const NetworkTier& t);

// Time of one collective over `bytes` (the full buffer: each rank's input
// for all-reduce and reduce-scatter, each rank's output for all-gather, the
// message for send/recv). Picks the fastest algorithm, as NCCL/RCCL's tuner does:
//   ring all-reduce        2(n-1) a + 2 (n-1)/n S/b       (Patarasuk & Yuan 2009)
//   ring reduce-scatter /
//        all-gather        (n-1) a + (n-1)/n S/b
//   tree all-reduce        2 log2(n) a + 2 S/b            (pipelined binary trees)
//   hierarchical           reduce-scatter in the node, all-reduce of S/k
//                          across nodes, all-gather in the node (k ranks/node)
// `world`: the job's ranks, as for group_tier.
CommCost collective_cost(const SystemSpec& sys, CommOp op, double bytes, int64_t size,
                         int64_t stride, int64_t world = 0);

}  // namespace tessera::plan

#include "tessera/plan/comm_model.h"

#include <algorithm>
#include <cmath>

#include "tessera/core/error.h"

namespace tessera::plan {

namespace {

// Whether every group (or, for send/recv, every pair r, r + stride) of a
// world of `world` ranks lies inside one block of `block` consecutive ranks.
// O(1), as the search prices thousands of layouts of thousands of ranks:
// - groups of `size` ranks `stride` apart tile the world in runs of
//   size * stride ranks (world is a multiple of that), each run holding
//   `stride` interleaved groups. A block boundary inside a run splits one of
//   them (interleaved members on both sides), so every group is inside a
//   block exactly when the runs are: when size * stride divides the block;
// - a pair r, r + stride straddles a boundary whenever stride >= block, and
//   otherwise for r = block - stride, a pair that exists once world > block:
//   with world > block, only a world with no pair at all is inside.
bool groups_inside_blocks(CommOp op, int64_t size, int64_t stride, int64_t world,
                          int64_t block) {
  if (world <= block) return true;
  if (size <= 1 && comm::is_collective(op)) return true;  // one member: nothing to cross
  if (!comm::is_collective(op)) return stride >= world;  // true: there is no pair
  return block % (size * stride) == 0;
}

}  // namespace

const NetworkTier& group_tier(const SystemSpec& sys, CommOp op, int64_t size, int64_t stride,
                              int64_t world) {
  if (world <= 0) {
    // One group, its first rank aligned: it needs the block its span fills.
    const int64_t span = (size - 1) * stride + 1;
    for (const auto& t : sys.tiers)
      if (t.ranks == 0 || span <= t.ranks) return t;
    return sys.tiers.back();
  }
  for (const auto& t : sys.tiers)
    if (t.ranks == 0 || (world <= t.ranks) || groups_inside_blocks(op, size, stride, world, t.ranks))
      return t;
  return sys.tiers.back();
}

RingTerms ring_terms(CommOp op, double bytes, double n, const NetworkTier& t) {
  const double a = t.latency, b = t.effective_bandwidth();
  switch (op) {
    case CommOp::AllReduce: return {2 * (n - 1) * a, 2 * (n - 1) / n * bytes / b};
    case CommOp::ReduceScatter:
    case CommOp::AllGather: return {(n - 1) * a, (n - 1) / n * bytes / b};
    case CommOp::Send:
    case CommOp::Recv: return {a, bytes / b};
    // Pairwise exchange: n - 1 messages a rank, each block but its own on
    // the wire once (the bus factor of comm_op.h).
    case CommOp::AllToAll: return {(n - 1) * a, (n - 1) / n * bytes / b};
    case CommOp::Broadcast:
    case CommOp::Barrier: break;
  }
  fail("the planner does not price a {}", comm::comm_op_name(op));
}

namespace {

double ring(CommOp op, double bytes, double n, const NetworkTier& t) {
  const RingTerms r = ring_terms(op, bytes, n, t);
  const auto& f = t.collective_factor;  // measured / this model's bandwidth term (system.h)
  switch (op) {
    case CommOp::AllReduce: return r.latency + f[0] * r.bandwidth;
    case CommOp::ReduceScatter: return r.latency + f[1] * r.bandwidth;
    case CommOp::AllGather: return r.latency + f[2] * r.bandwidth;
    case CommOp::Send:
    case CommOp::Recv:
    case CommOp::AllToAll: return r.latency + r.bandwidth;  // no measured factor for it yet
    case CommOp::Broadcast:
    case CommOp::Barrier: break;  // ring_terms refused it
  }
  return 0;
}

double tree_all_reduce(double bytes, double n, const NetworkTier& t) {
  return 2 * std::ceil(std::log2(n)) * t.latency +
         t.collective_factor[0] * 2 * bytes / t.effective_bandwidth();
}

}  // namespace

CommCost collective_cost(const SystemSpec& sys, CommOp op, double bytes, int64_t size,
                         int64_t stride, int64_t world) {
  CommCost c;
  if (size <= 1 || bytes <= 0) return c;
  const bool p2p = !comm::is_collective(op);
  const NetworkTier& tier = group_tier(sys, op, p2p ? 2 : size, stride, world);
  c.tier = &tier;
  const double n = double(size);
  if (p2p) {
    c.seconds = ring(op, bytes, 2, tier);
    c.algorithm = "p2p";
    return c;
  }
  c.seconds = ring(op, bytes, n, tier);
  c.algorithm = "ring";
  if (op == CommOp::AllReduce) {
    double tree = tree_all_reduce(bytes, n, tier);
    if (tree < c.seconds) c.seconds = tree, c.algorithm = "tree";
  }
  // Hierarchical: when the group leaves the node but several members share
  // one, do the node-local part on the fast link and send only 1/k across.
  const int64_t per_node = std::min<int64_t>(size, std::max<int64_t>(1, sys.devices_per_node / stride));
  // The node-local parts are the groups' runs of `per_node` consecutive
  // members; they must themselves stay inside a node (not so for tp 6 on
  // 8-device nodes, where a group has 2 members on one node and 4 on the next).
  if (tier.ranks == 0 && per_node > 1 && size % per_node == 0 && sys.tiers.size() > 1 &&
      group_tier(sys, op, per_node, stride, world).ranks != 0) {
    const NetworkTier& inner = group_tier(sys, op, per_node, stride, world);
    const double k = double(per_node), outer_n = double(size / per_node);
    double h = 0;
    switch (op) {
      case CommOp::AllReduce:
        h = ring(CommOp::ReduceScatter, bytes, k, inner) +
            std::min(ring(CommOp::AllReduce, bytes / k, outer_n, tier),
                     tree_all_reduce(bytes / k, outer_n, tier)) +
            ring(CommOp::AllGather, bytes, k, inner);
        break;
      case CommOp::ReduceScatter:
      case CommOp::AllGather:
        h = ring(op, bytes, k, inner) + ring(op, bytes / k, outer_n, tier);
        break;
      default: break;  // send / recv: no node-local part
    }
    if (h > 0 && h < c.seconds) c.seconds = h, c.algorithm = "hierarchical";
  }
  return c;
}

}  // namespace tessera::plan

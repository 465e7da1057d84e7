// The operations a Communicator performs, named once so the log, the byte
// counters, the watchdog and the progress board all speak the same words.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tessera::comm {

enum class ReduceOp : uint8_t { Sum, Max };

enum class CommOp : uint8_t {
  AllReduce,
  ReduceScatter,
  AllGather,
  Broadcast,
  Barrier,
  Send,
  Recv,
  AllToAll,  // every rank sends a block to every rank (blocks of any size: alltoallv)
};
inline constexpr int kNumCommOps = 8;

constexpr std::string_view comm_op_name(CommOp op) {
  switch (op) {
    case CommOp::AllReduce: return "all_reduce";
    case CommOp::ReduceScatter: return "reduce_scatter";
    case CommOp::AllGather: return "all_gather";
    case CommOp::Broadcast: return "broadcast";
    case CommOp::Barrier: return "barrier";
    case CommOp::Send: return "send";
    case CommOp::Recv: return "recv";
    case CommOp::AllToAll: return "all_to_all";
  }
  return "?";
}

// Collectives must be entered by every rank of a group in the same order;
// point-to-point calls pair up with one peer and are not part of that order.
constexpr bool is_collective(CommOp op) { return op != CommOp::Send && op != CommOp::Recv; }

// Bandwidth conventions (those of nccl-tests, so numbers compare with the
// literature). `bytes` below is always the op's *data size* S:
//   all_reduce     S = the buffer                         bus factor 2(n-1)/n
//   reduce_scatter S = the full input (n * shard)          bus factor  (n-1)/n
//   all_gather     S = the full output (n * shard)         bus factor  (n-1)/n
//   broadcast      S = the buffer                          bus factor  1
//   send / recv    S = the message                         bus factor  1
//   all_to_all     S = all this rank sends (n blocks)      bus factor  (n-1)/n
//   barrier        S = 0
// algorithm bandwidth = S / t; bus bandwidth = algbw * factor, which is also
// the bytes each rank puts on the wire per S under a bandwidth-optimal (ring)
// algorithm, so the step counters call S * factor "wire bytes".
// The data size S of a call of `count` elements of `elem_bytes` each, as
// the Communicator hands them to its backend (the buffer's count; the
// shard's for reduce_scatter and all_gather; for all_to_all the sum of the
// blocks it sends) on a group of `group_size`.
constexpr size_t data_size(CommOp op, size_t count, size_t elem_bytes, int group_size) {
  const size_t bytes = count * elem_bytes;
  if (op == CommOp::ReduceScatter || op == CommOp::AllGather) return size_t(group_size) * bytes;
  if (op == CommOp::Barrier) return 0;
  return bytes;
}
constexpr double bus_factor(CommOp op, int group_size) {
  const double n = group_size;
  if (group_size <= 1) return op == CommOp::Send || op == CommOp::Recv ? 1.0 : 0.0;
  switch (op) {
    case CommOp::AllReduce: return 2.0 * (n - 1) / n;
    case CommOp::ReduceScatter:
    case CommOp::AllGather:
    case CommOp::AllToAll: return (n - 1) / n;  // the block a rank keeps does not travel
    case CommOp::Broadcast:
    case CommOp::Send:
    case CommOp::Recv: return 1.0;
    case CommOp::Barrier: return 0.0;
  }
  return 0.0;
}

}  // namespace tessera::comm

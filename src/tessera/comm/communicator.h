// Communicator: the only door to inter-process communication. It is one
// concrete class over a CommBackend (comm_backend.h: MPI today, a GPU
// library later), which implements only the asynchronous primitives; this
// class checks arguments, logs and counts every call, feeds the watchdog's
// progress board, and runs the blocking forms as the async form + wait.
//
// A Communicator is a group of ranks. Grid hands each piece of the engine the
// group it needs (tp, dp, pp, embedding); nothing reaches for a global one.
// `split(color, key)` makes sub-groups exactly like MPI_Comm_split, so
// `Group` is just another name for the same type.
//
// Conventions, for every call:
//   - counts are in elements of `dtype`; buffers are the caller's.
//   - reductions (all_reduce, reduce_scatter) take Precision::Fp32 or BF16 (a
//     bf16 sum rounds to bf16 after each pairwise add; all_reduce also F64); data
//     movement (all_gather, broadcast, send, recv) takes any dtype.
//   - reduce_scatter / all_gather are "block" forms: every rank owns a shard
//     of exactly `shard_count` elements, so the full buffer is
//     size() * shard_count. Callers pad buffers that do not divide (see
//     shard.h). reduce_scatter may run in place (recv == send + rank*shard),
//     and so may all_gather (send == recv + rank*shard).
//   - all_to_all takes blocks of any size (MPI's alltoallv): send holds
//     size() blocks in rank order, send_counts[j] elements for rank j;
//     recv receives recv_counts[i] elements from rank i, in rank order.
//     Rank i's send_counts[j] must equal rank j's recv_counts[i]:
//     exchange_counts() gives each rank its recv_counts from its
//     send_counts (the token counts of an expert-parallel dispatch).
//   - the *_async form starts the call and returns a Work; the buffers must
//     stay untouched until it completes. Async collectives on one group run
//     in the order they were issued, and every rank must issue the group's
//     collectives (blocking and async together) in the same order.
//   - one thread drives a given Communicator at a time.
//   - every call is logged (collective_log.h) and counted for step metrics;
//     an argument error throws before the call is logged.
#pragma once
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tessera/comm/comm_backend.h"
#include "tessera/comm/comm_op.h"
#include "tessera/comm/work.h"
#include "tessera/core/dtype.h"

namespace tessera::comm {

class CollectiveLog;
class CommMonitor;

class Communicator {
 public:
  // Collective over the backend's group: the members agree on the group's
  // slot on the progress board. `monitor` is the rank's log and board,
  // shared by all of its groups.
  Communicator(std::unique_ptr<CommBackend> backend, std::string name,
               std::shared_ptr<CommMonitor> monitor);
  // Virtual only so that LocalCommunicator (a Communicator built over a
  // LocalBackend) can be owned through a Communicator pointer.
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }  // "world", "tp", "dp", ...
  // Global (world) rank of a member of this group: for messages a user reads.
  int world_rank_of(int group_rank) const;
  // The per-rank log every call is recorded in (shared by all groups of a rank).
  CollectiveLog& log();
  int group_id() const { return group_id_; }  // the group's slot on the progress board

  // Collective over this group. Ranks passing the same color form a new
  // group, ordered by key (ties by current rank). A rank passing a negative
  // color gets no group (nullptr), like MPI_UNDEFINED.
  std::unique_ptr<Communicator> split(int color, int key, std::string name);

  // ---- blocking ----
  void all_reduce(void* data, size_t count, Precision dtype, ReduceOp op);
  void reduce_scatter(const void* send, void* recv, size_t shard_count, Precision dtype, ReduceOp op);
  void all_gather(const void* send, void* recv, size_t shard_count, Precision dtype);
  void broadcast(void* data, size_t count, Precision dtype, int root);
  void send(const void* data, size_t count, Precision dtype, int peer, int tag);
  void recv(void* data, size_t count, Precision dtype, int peer, int tag);
  void barrier();
  void all_to_all(const void* send, std::span<const size_t> send_counts, void* recv,
                  std::span<const size_t> recv_counts, Precision dtype);
  // recv_counts (size()) from send_counts (size()): one element to each
  // rank, collective over the group.
  std::vector<size_t> exchange_counts(std::span<const size_t> send_counts);

  // ---- non-blocking ----
  Work all_reduce_async(void* data, size_t count, Precision dtype, ReduceOp op);
  Work reduce_scatter_async(const void* send, void* recv, size_t shard_count, Precision dtype,
                            ReduceOp op);
  Work all_gather_async(const void* send, void* recv, size_t shard_count, Precision dtype);
  Work broadcast_async(void* data, size_t count, Precision dtype, int root);
  Work send_async(const void* data, size_t count, Precision dtype, int peer, int tag);
  Work recv_async(void* data, size_t count, Precision dtype, int peer, int tag);
  Work barrier_async();
  Work all_to_all_async(const void* send, std::span<const size_t> send_counts, void* recv,
                        std::span<const size_t> recv_counts, Precision dtype);

  // ---- fp32 conveniences (the common case) ----
  void all_reduce(std::span<float> data, ReduceOp op = ReduceOp::Sum) {
    all_reduce(data.data(), data.size(), Precision::Fp32, op);
  }
  Work all_reduce_async(std::span<float> data, ReduceOp op = ReduceOp::Sum) {
    return all_reduce_async(data.data(), data.size(), Precision::Fp32, op);
  }
  // send.size() must be size() * recv.size().
  void reduce_scatter(std::span<const float> send, std::span<float> recv,
                      ReduceOp op = ReduceOp::Sum);
  Work reduce_scatter_async(std::span<const float> send, std::span<float> recv,
                            ReduceOp op = ReduceOp::Sum);
  // recv.size() must be size() * send.size().
  void all_gather(std::span<const float> send, std::span<float> recv);
  Work all_gather_async(std::span<const float> send, std::span<float> recv);
  void broadcast(std::span<float> data, int root) {
    broadcast(data.data(), data.size(), Precision::Fp32, root);
  }
  void send(std::span<const float> data, int peer, int tag = 0) {
    send(data.data(), data.size(), Precision::Fp32, peer, tag);
  }
  void recv(std::span<float> data, int peer, int tag = 0) {
    recv(data.data(), data.size(), Precision::Fp32, peer, tag);
  }
  // One scalar, reduced over the group: losses, norms, counts.
  float all_reduce_scalar(float value, ReduceOp op = ReduceOp::Sum) {
    all_reduce(&value, 1, Precision::Fp32, op);
    return value;
  }
  // In double, for sums that must neither round nor overflow float (the
  // squared gradient norm: its divergence step must not depend on the layout).
  double all_reduce_scalar(double value, ReduceOp op = ReduceOp::Sum) {
    all_reduce(&value, 1, Precision::Fp64, op);
    return value;
  }
  // The world ranks of every member, in group-rank order.
  std::vector<int> world_ranks() const;

 private:
  // Each op once: checks, then the backend's primitive; the blocking form
  // waits on the Work at once.
  Work start_all_reduce(void* data, size_t count, Precision dtype, ReduceOp op, bool blocking);
  Work start_reduce_scatter(const void* send, void* recv, size_t shard_count, Precision dtype,
                            ReduceOp op, bool blocking);
  Work start_all_gather(const void* send, void* recv, size_t shard_count, Precision dtype,
                        bool blocking);
  Work start_broadcast(void* data, size_t count, Precision dtype, int root, bool blocking);
  Work start_send(const void* data, size_t count, Precision dtype, int peer, int tag, bool blocking);
  Work start_recv(void* data, size_t count, Precision dtype, int peer, int tag, bool blocking);
  Work start_all_to_all(const void* send, std::span<const size_t> send_counts, void* recv,
                        std::span<const size_t> recv_counts, Precision dtype, bool blocking);

  void check_count(size_t count) const;      // within the backend's limit
  // f32, and f64 where allowed (all-reduce: MPI sums it; the ring reduce-scatter is f32 only).
  void check_reducible(Precision dtype, bool f64_allowed) const;
  // Logs the call as issued (and, for a collective, enters it on the
  // progress board); the backend reports its start and end through it.
  CommCall issue(CommOp op, size_t bytes, int peer_world, bool blocking);

  std::shared_ptr<CommMonitor> monitor_;  // declared first: outlives the backend's threads
  std::string name_;
  std::unique_ptr<CommBackend> backend_;
  int rank_ = 0;
  int size_ = 1;
  int group_id_ = 0;
  uint64_t next_collective_seq_ = 0;  // same on every member: the watchdog compares them
  uint64_t next_p2p_seq_ = 0;         // this rank's own count of sends and receives
};

using Group = Communicator;

}  // namespace tessera::comm

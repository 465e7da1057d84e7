// Communicator: the only door to inter-process communication (MPI today, a GPU
// library later, behind the same virtual interface).
//
// A Communicator is a group of ranks. Grid hands each piece of the engine the
// group it needs (tp, dp, pp, embedding); nothing reaches for a global one.
// `split(color, key)` makes sub-groups exactly like MPI_Comm_split, so
// `Group` is just another name for the same type.
//
// Conventions, for every call:
//   - counts are in elements of `dtype`; buffers are the caller's.
//   - reductions (all_reduce, reduce_scatter) need DType::F32 for now; data
//     movement (all_gather, broadcast, send, recv) takes any dtype.
//   - reduce_scatter / all_gather are "block" forms: every rank owns a shard
//     of exactly `shard_count` elements, so the full buffer is
//     size() * shard_count. Callers pad buffers that do not divide (see
//     shard.h). reduce_scatter may run in place (recv == send + rank*shard),
//     and so may all_gather (send == recv + rank*shard).
//   - the *_async form starts the call and returns a Work; the buffers must
//     stay untouched until it completes. Async collectives on one group run
//     in the order they were issued, and every rank must issue the group's
//     collectives (blocking and async together) in the same order.
//   - one thread drives a given Communicator at a time.
//   - every call is logged (collective_log.h) and counted for step metrics.
#pragma once
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tessera/comm/comm_op.h"
#include "tessera/comm/work.h"
#include "tessera/core/dtype.h"

namespace tessera::comm {

class CollectiveLog;

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;  // "world", "tp", "dp", ...
  // Global (world) rank of a member of this group: for messages a user reads.
  virtual int world_rank_of(int group_rank) const = 0;
  // The per-rank log every call is recorded in (shared by all groups of a rank).
  virtual CollectiveLog& log() = 0;

  // Collective over this group. Ranks passing the same color form a new
  // group, ordered by key (ties by current rank). A rank passing a negative
  // color gets no group (nullptr), like MPI_UNDEFINED.
  virtual std::unique_ptr<Communicator> split(int color, int key, std::string name) = 0;

  // ---- blocking ----
  virtual void all_reduce(void* data, size_t count, DType dtype, ReduceOp op) = 0;
  virtual void reduce_scatter(const void* send, void* recv, size_t shard_count, DType dtype,
                              ReduceOp op) = 0;
  virtual void all_gather(const void* send, void* recv, size_t shard_count, DType dtype) = 0;
  virtual void broadcast(void* data, size_t count, DType dtype, int root) = 0;
  virtual void send(const void* data, size_t count, DType dtype, int peer, int tag) = 0;
  virtual void recv(void* data, size_t count, DType dtype, int peer, int tag) = 0;
  virtual void barrier() = 0;

  // ---- non-blocking ----
  virtual Work all_reduce_async(void* data, size_t count, DType dtype, ReduceOp op) = 0;
  virtual Work reduce_scatter_async(const void* send, void* recv, size_t shard_count,
                                    DType dtype, ReduceOp op) = 0;
  virtual Work all_gather_async(const void* send, void* recv, size_t shard_count,
                                DType dtype) = 0;
  virtual Work broadcast_async(void* data, size_t count, DType dtype, int root) = 0;
  virtual Work send_async(const void* data, size_t count, DType dtype, int peer, int tag) = 0;
  virtual Work recv_async(void* data, size_t count, DType dtype, int peer, int tag) = 0;
  virtual Work barrier_async() = 0;

  // ---- fp32 conveniences (the common case) ----
  void all_reduce(std::span<float> data, ReduceOp op = ReduceOp::Sum) {
    all_reduce(data.data(), data.size(), DType::F32, op);
  }
  Work all_reduce_async(std::span<float> data, ReduceOp op = ReduceOp::Sum) {
    return all_reduce_async(data.data(), data.size(), DType::F32, op);
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
    broadcast(data.data(), data.size(), DType::F32, root);
  }
  void send(std::span<const float> data, int peer, int tag = 0) {
    send(data.data(), data.size(), DType::F32, peer, tag);
  }
  void recv(std::span<float> data, int peer, int tag = 0) {
    recv(data.data(), data.size(), DType::F32, peer, tag);
  }
  // One scalar, reduced over the group: losses, norms, counts.
  float all_reduce_scalar(float value, ReduceOp op = ReduceOp::Sum) {
    all_reduce(&value, 1, DType::F32, op);
    return value;
  }
  // The world ranks of every member, in group-rank order.
  std::vector<int> world_ranks() const;
};

using Group = Communicator;

}  // namespace tessera::comm

// LocalCommunicator: a world of one process, no MPI at all.
//
// For code and tests that run single-process and should not need MPI
// initialized (kernels, model, planner). Every collective over one rank is
// the identity (or a copy); send/recv to oneself goes through a mailbox and
// must be sent before it is received, since nothing else could ever send it.
// Calls are logged and counted like the MPI backend's.
#pragma once
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/comm/collective_log.h"
#include "tessera/comm/communicator.h"

namespace tessera::comm {

class LocalCommunicator final : public Communicator {
 public:
  explicit LocalCommunicator(std::string name = "world",
                             std::shared_ptr<CollectiveLog> log = nullptr);

  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& name() const override { return name_; }
  int world_rank_of(int group_rank) const override;
  CollectiveLog& log() override { return *log_; }

  std::unique_ptr<Communicator> split(int color, int key, std::string name) override;

  void all_reduce(void* data, size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, size_t shard_count, DType dtype,
                      ReduceOp op) override;
  void all_gather(const void* send, void* recv, size_t shard_count, DType dtype) override;
  void broadcast(void* data, size_t count, DType dtype, int root) override;
  void send(const void* data, size_t count, DType dtype, int peer, int tag) override;
  void recv(void* data, size_t count, DType dtype, int peer, int tag) override;
  void barrier() override;

  // Everything completes before returning; the Work is already done.
  Work all_reduce_async(void* data, size_t count, DType dtype, ReduceOp op) override;
  Work reduce_scatter_async(const void* send, void* recv, size_t shard_count, DType dtype,
                            ReduceOp op) override;
  Work all_gather_async(const void* send, void* recv, size_t shard_count,
                        DType dtype) override;
  Work broadcast_async(void* data, size_t count, DType dtype, int root) override;
  Work send_async(const void* data, size_t count, DType dtype, int peer, int tag) override;
  Work recv_async(void* data, size_t count, DType dtype, int peer, int tag) override;
  Work barrier_async() override;

  using Communicator::all_gather;
  using Communicator::all_gather_async;
  using Communicator::all_reduce;
  using Communicator::all_reduce_async;
  using Communicator::broadcast;
  using Communicator::recv;
  using Communicator::reduce_scatter;
  using Communicator::reduce_scatter_async;
  using Communicator::send;

 private:
  void record(CommOp op, size_t bytes, bool async, int peer);
  void check_peer(int peer) const;

  std::string name_;
  std::shared_ptr<CollectiveLog> log_;
  uint64_t next_collective_seq_ = 0;
  uint64_t next_p2p_seq_ = 0;
  std::map<int, std::deque<std::vector<char>>> mailbox_;  // tag -> messages to self
};

}  // namespace tessera::comm

// MpiCommunicator: the Communicator over an MPI communicator.
//
// Each group holds three duplicates of its MPI communicator so traffic that
// may be in flight at the same time never matches the wrong partner:
//   comm_        blocking collectives (and their ring steps), caller's thread
//   async_comm_  non-blocking collectives, run in order on the CommStream
//   p2p_comm_    send / recv, blocking or MPI_Isend / MPI_Irecv
// Non-blocking send/recv stay true MPI requests (not stream tasks): a
// pipeline posts a send and a receive to the same peer together, and running
// them one after the other on a thread could deadlock on large messages.
#pragma once
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "tessera/comm/comm_monitor.h"
#include "tessera/comm/comm_stream.h"
#include "tessera/comm/communicator.h"

namespace tessera::comm {

class MpiCommunicator final : public Communicator {
 public:
  // Collective over `comm`: duplicates it (the caller keeps `comm`) and
  // agrees on a group id with the other members.
  MpiCommunicator(MPI_Comm comm, std::string name, std::shared_ptr<CommMonitor> monitor);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  int world_rank_of(int group_rank) const override;
  CollectiveLog& log() override { return monitor_->log(); }
  int group_id() const { return group_id_; }
  MPI_Comm mpi_comm() const { return comm_; }

  std::unique_ptr<Communicator> split(int color, int key, std::string name) override;

  void all_reduce(void* data, size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, size_t shard_count, DType dtype,
                      ReduceOp op) override;
  void all_gather(const void* send, void* recv, size_t shard_count, DType dtype) override;
  void broadcast(void* data, size_t count, DType dtype, int root) override;
  void send(const void* data, size_t count, DType dtype, int peer, int tag) override;
  void recv(void* data, size_t count, DType dtype, int peer, int tag) override;
  void barrier() override;

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
  // One call's entry in the log and on the progress board.
  struct Ticket {
    uint64_t log_id = 0;
    uint64_t seq = 0;
    bool collective = false;
  };
  Ticket issue(CommOp op, size_t bytes, int peer_world, bool async);
  void start(const Ticket& t);
  void finish(const Ticket& t);
  // Runs `body` as a logged blocking call, or queues it on the stream.
  void run_blocking(CommOp op, size_t bytes, int peer_world, const std::function<void()>& body);
  Work run_async(CommOp op, size_t bytes, int peer_world, std::function<void()> body);

  // The bodies, shared by the blocking and async forms.
  void do_all_reduce(MPI_Comm c, void* data, size_t count, DType dtype, ReduceOp op);
  void do_reduce_scatter(MPI_Comm c, const void* send, void* recv, size_t shard_count,
                         DType dtype, ReduceOp op, std::vector<float>& scratch);
  void do_all_gather(MPI_Comm c, const void* send, void* recv, size_t shard_count, DType dtype);

  std::shared_ptr<CommMonitor> monitor_;
  std::string name_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm async_comm_ = MPI_COMM_NULL;
  MPI_Comm p2p_comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int group_id_ = 0;
  std::vector<int> world_ranks_;
  uint64_t next_collective_seq_ = 0;
  uint64_t next_p2p_seq_ = 0;
  std::vector<float> scratch_;        // ring buffers of the blocking path
  std::vector<float> async_scratch_;  // and of the stream (they may overlap in time)
  std::unique_ptr<CommStream> stream_;  // declared last: joined before the rest goes
};

}  // namespace tessera::comm

// MpiBackend: the CommBackend over an MPI communicator.
//
// Each group holds three duplicates of its MPI communicator so traffic that
// may be in flight at the same time never matches the wrong partner:
//   comm_        blocking collectives (and their ring steps), caller's thread
//   async_comm_  non-blocking collectives, run in order on the CommStream
//   p2p_comm_    send / recv, blocking or MPI_Isend / MPI_Irecv
// A call the caller waits for at once (CommCall::blocking) runs on the
// caller's thread over comm_, so it never queues behind async collectives.
// Non-blocking send/recv stay true MPI requests (not stream tasks): a
// pipeline posts a send and a receive to the same peer together, and running
// them one after the other on a thread could deadlock on large messages.
#pragma once
#include <mpi.h>

#include <functional>
#include <memory>
#include <vector>

#include "tessera/comm/comm_backend.h"
#include "tessera/comm/comm_stream.h"

namespace tessera::comm {

class MpiBackend final : public CommBackend {
 public:
  // Duplicates `comm` (the caller keeps `comm`). Collective over it.
  explicit MpiBackend(MPI_Comm comm);
  ~MpiBackend() override;
  MpiBackend(const MpiBackend&) = delete;
  MpiBackend& operator=(const MpiBackend&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int world_rank_of(int group_rank) const override { return world_ranks_[size_t(group_rank)]; }
  size_t max_count() const override;

  std::unique_ptr<CommBackend> split(int color, int key) override;

#define TESSERA_COMM_PRIMITIVE(name, params) Work name params override;
#include "tessera/comm/comm_primitives.inc"
#undef TESSERA_COMM_PRIMITIVE

 private:
  // A collective's body, given the MPI communicator and ring scratch of the
  // lane it runs on (blocking: comm_ and scratch_; async: the stream's).
  using Body = std::function<void(MPI_Comm comm, std::vector<float>& scratch)>;
  // Runs `body` now on the caller's thread, or queues it on the stream.
  Work run_collective(const CommCall& call, Body body);

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm async_comm_ = MPI_COMM_NULL;
  MPI_Comm p2p_comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> world_ranks_;      // (size) world rank of each member
  std::vector<float> scratch_;        // ring buffers of the blocking path
  std::vector<float> async_scratch_;  // and of the stream (they may overlap in time)
  std::unique_ptr<CommStream> stream_;  // declared last: joined before the rest goes
};

}  // namespace tessera::comm

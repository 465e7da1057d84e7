// LocalBackend: a world of one process, no MPI at all.
//
// For code and tests that run single-process and should not need MPI
// initialized (kernels, model, planner). Every collective over one rank is
// the identity (or a copy); send/recv to oneself goes through a mailbox and
// must be sent before it is received, since nothing else could ever send it.
// Every call completes before it returns (the Work is already done).
#pragma once
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "tessera/comm/comm_backend.h"

namespace tessera::comm {

class LocalBackend final : public CommBackend {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int world_rank_of(int) const override { return 0; }

  std::unique_ptr<CommBackend> split(int color, int key) override;

  Work iall_reduce(void* data, size_t count, Precision dtype, ReduceOp op,
                   const CommCall& call) override;
  Work ireduce_scatter(const void* send, void* recv, size_t shard_count, Precision dtype, ReduceOp op,
                       const CommCall& call) override;
  Work iall_gather(const void* send, void* recv, size_t shard_count, Precision dtype,
                   const CommCall& call) override;
  Work ibroadcast(void* data, size_t count, Precision dtype, int root, const CommCall& call) override;
  Work isend(const void* data, size_t count, Precision dtype, int peer, int tag,
             const CommCall& call) override;
  Work irecv(void* data, size_t count, Precision dtype, int peer, int tag,
             const CommCall& call) override;
  Work ibarrier(const CommCall& call) override;

 private:
  std::map<int, std::deque<std::vector<char>>> mailbox_;  // tag -> messages to self (bytes)
};

}  // namespace tessera::comm

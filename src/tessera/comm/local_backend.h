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

#define TESSERA_COMM_PRIMITIVE(name, params) Work name params override;
#include "tessera/comm/comm_primitives.inc"
#undef TESSERA_COMM_PRIMITIVE

 private:
  std::map<int, std::deque<std::vector<char>>> mailbox_;  // tag -> messages to self (bytes)
};

}  // namespace tessera::comm

// CommBackend: what a transport (MPI today, NCCL/RCCL later) implements so
// that a Communicator can run over it. Only the asynchronous primitives:
// the Communicator in front of it checks arguments, logs and counts every
// call, feeds the watchdog's progress board, and builds the blocking forms
// as "start, then wait".
//
// Each primitive receives a CommCall and must
//   - call started() when the operation enters the transport and finished()
//     when it has completed, from whichever thread does the work (the log
//     times the call between the two; the watchdog flags a call started and
//     not finished for too long),
//   - return a Work that completes when the caller's buffers are free again
//     (a default Work if it completed before returning).
// When call.blocking() the Communicator waits on the Work at once, so a
// backend may run the call on the caller's thread instead of queueing it.
//
// Arguments arrive checked (see communicator.h for the conventions): ranks
// are in the group, reductions are f32, counts are within max_count().
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>

#include "tessera/comm/comm_op.h"
#include "tessera/comm/work.h"
#include "tessera/core/dtype.h"

namespace tessera::comm {

class CommMonitor;

// One call as the Communicator hands it to a backend: whether the caller
// waits for it at once, and where its progress is reported. Copyable, so an
// asynchronous backend can carry it to the thread that completes the call.
class CommCall {
 public:
  // A call nobody logs (the Communicator's own set-up traffic).
  static CommCall unlogged(bool blocking) { return CommCall(blocking, nullptr, 0, 0, 0, false); }
  CommCall(bool blocking, CommMonitor* monitor, uint64_t log_id, int group_id, uint64_t seq,
           bool collective)
      : blocking_(blocking),
        collective_(collective),
        group_id_(group_id),
        monitor_(monitor),
        log_id_(log_id),
        seq_(seq) {}

  bool blocking() const { return blocking_; }
  // False for the Communicator's own set-up traffic (unlogged()): the op
  // trace (trace_backend.h) records only the calls the engine makes.
  bool logged() const { return monitor_ != nullptr; }
  void started() const;   // the call entered the transport
  void finished() const;  // the call completed

 private:
  bool blocking_ = true;
  bool collective_ = false;  // collectives also move this rank's progress board
  int group_id_ = 0;
  CommMonitor* monitor_ = nullptr;  // outlives the call: the Communicator holds it
  uint64_t log_id_ = 0;
  uint64_t seq_ = 0;
};

class CommBackend {
 public:
  virtual ~CommBackend() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // World rank of a member (group_rank is in range).
  virtual int world_rank_of(int group_rank) const = 0;
  // The most elements one call may move (MPI counts are ints).
  virtual size_t max_count() const { return std::numeric_limits<size_t>::max(); }

  // Collective over the group, like MPI_Comm_split: nullptr for a negative color.
  virtual std::unique_ptr<CommBackend> split(int color, int key) = 0;

  // ---- the asynchronous primitives (comm_primitives.inc) ----
#define TESSERA_COMM_PRIMITIVE(name, params) virtual Work name params = 0;
#include "tessera/comm/comm_primitives.inc"
#undef TESSERA_COMM_PRIMITIVE
};

}  // namespace tessera::comm

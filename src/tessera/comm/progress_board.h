// ProgressBoard: how far each rank has got in each of its groups' collective
// sequences, published where any rank can read it without the owner's help.
//
// Why a window: when a job hangs, the interesting rank is the one that never
// entered the collective, and it is busy elsewhere (computing, stuck in a
// different call, sleeping). Anything that needs its cooperation, a message
// it must answer, cannot be relied on. An MPI window (MPI_Win_allocate over
// the world) read with passive-target MPI_Rget needs nothing from the
// target: on one node Open MPI's osc/sm turns it into a load from shared
// memory, across nodes osc/rdma into an RDMA read. Where the transport would
// need the target's progress after all, reads take a deadline and report
// "no answer" instead of hanging the watchdog.
//
// Layout, per rank, per group slot (kMaxGroups slots, one per group id):
//   word 0: collectives entered (= next sequence number)
//   word 1: collectives completed
//   then kHistory (key, bytes) pairs, seq % kHistory: key = (seq+1) << 8 | op
// The owner writes its own slots with atomic 64-bit stores; a reader may see
// a history entry half-updated while ranks are still moving, never while
// they hang, which is when it matters.
#pragma once
#include <mpi.h>

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "tessera/comm/comm_op.h"

namespace tessera::comm {

struct BoardEntry {
  uint64_t seq = 0;
  CommOp op = CommOp::Barrier;
  uint64_t bytes = 0;
};

struct GroupProgress {
  uint64_t entered = 0;    // collectives this rank has issued on the group
  uint64_t completed = 0;  // and finished
  std::vector<BoardEntry> recent;  // up to kHistory of the newest, any order

  std::optional<BoardEntry> find(uint64_t seq) const;
};

class ProgressBoard {
 public:
  static constexpr int kMaxGroups = 64;
  static constexpr int kHistory = 16;

  explicit ProgressBoard(MPI_Comm world);  // collective over `world`
  ~ProgressBoard();                        // collective too
  ProgressBoard(const ProgressBoard&) = delete;
  ProgressBoard& operator=(const ProgressBoard&) = delete;

  // Called by the owner when it issues / completes collective `seq` on a group.
  void publish_entered(int group_id, uint64_t seq, CommOp op, uint64_t bytes);
  void publish_completed(int group_id, uint64_t seq);

  // Another rank's (or this rank's) progress on a group; nullopt if the read
  // did not complete within `timeout_s`.
  std::optional<GroupProgress> read(int world_rank, int group_id, double timeout_s) const;

 private:
  static constexpr int kSlotWords = 2 + 2 * kHistory;
  uint64_t* slot(int group_id) const { return base_ + size_t(group_id) * kSlotWords; }
  void sync_if_separate() const;

  MPI_Win window_ = MPI_WIN_NULL;
  uint64_t* base_ = nullptr;
  int my_rank_ = 0;
  bool separate_model_ = false;  // MPI_WIN_SEPARATE: local stores need MPI_Win_sync
};

}  // namespace tessera::comm

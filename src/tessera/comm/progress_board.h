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
//   word 2: the group's name (its first 8 characters)
//   words 3-5: its members as world ranks first, first + stride, ... (count
//     of them; 0 when they are no arithmetic progression; every group the
//     Grid makes is one), so a rank outside the group can check them too
//   then kHistory (key, bytes) pairs, seq % kHistory: key = (seq+1) << 8 | op
// and one status slot after them, which the rank's watchdog thread rewrites
// a few times a second:
//   word 0: heartbeat (how many times it has; 0 = no watchdog runs there)
//   word 1: how many calls follow, then per call (group id << 8 | op, seq,
//     peer + 1): the calls the rank has started and not finished, newest
//     first (what it waits in)
// A heartbeat that stops moving means the whole process stopped (SIGSTOP,
// a debugger, a frozen node): its threads all stand still, this one too.
// The owner writes its own slots with atomic 64-bit stores; a reader may see
// an entry half-updated while ranks are still moving, never while they
// hang, which is when it matters.
#pragma once
#include <mpi.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
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

  std::string name;          // the group's name (up to 8 characters)
  std::vector<int> members;  // world ranks in group order; empty if unknown

  std::optional<BoardEntry> find(uint64_t seq) const;
};

// A call some rank has started and not finished.
struct WaitingCall {
  int group_id = 0;
  uint64_t seq = 0;
  CommOp op = CommOp::Barrier;
  int peer = -1;  // send/recv: the peer's world rank
};

struct RankStatus {
  uint64_t heartbeat = 0;            // 0: the rank runs no watchdog
  std::vector<WaitingCall> waiting;  // newest first
};

class ProgressBoard {
 public:
  static constexpr int kMaxGroups = 64;
  static constexpr int kHistory = 16;
  static constexpr int kMaxWaiting = 8;  // calls a status holds

  explicit ProgressBoard(MPI_Comm world);  // collective over `world`
  ~ProgressBoard();                        // collective too
  ProgressBoard(const ProgressBoard&) = delete;
  ProgressBoard& operator=(const ProgressBoard&) = delete;

  // Called by the owner when it issues / completes collective `seq` on a group.
  void publish_entered(int group_id, uint64_t seq, CommOp op, uint64_t bytes);
  void publish_completed(int group_id, uint64_t seq);
  // Called once per group, when it is made.
  void publish_group(int group_id, const std::string& name, const std::vector<int>& world_ranks);
  // Called by the watchdog thread: one more heartbeat, and what this rank waits in.
  void publish_status(uint64_t heartbeat, const std::vector<WaitingCall>& waiting);

  // Another rank's (or this rank's) progress on a group; nullopt if the read
  // did not complete within `timeout_s`.
  std::optional<GroupProgress> read(int world_rank, int group_id, double timeout_s) const;
  // Another rank's status slot, the same way.
  std::optional<RankStatus> read_status(int world_rank, double timeout_s) const;

 private:
  static constexpr int kHeaderWords = 6;
  static constexpr int kSlotWords = kHeaderWords + 2 * kHistory;
  static constexpr int kStatusSlot = kMaxGroups;  // after the group slots
  static_assert(2 + 3 * kMaxWaiting <= kSlotWords, "a status must fit in one slot");
  uint64_t* slot(int slot_index) const { return base_ + size_t(slot_index) * kSlotWords; }
  // Copies one slot of `world_rank`'s board; false if the read did not complete in time.
  bool read_slot(int world_rank, int slot_index, double timeout_s, uint64_t* out) const;
  void sync_if_separate() const;

  MPI_Win window_ = MPI_WIN_NULL;
  uint64_t* base_ = nullptr;
  int my_rank_ = 0;
  int world_size_ = 1;
  bool separate_model_ = false;  // MPI_WIN_SEPARATE: local stores need MPI_Win_sync
};

}  // namespace tessera::comm

#include "tessera/comm/progress_board.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "tessera/core/error.h"
#include "tessera/core/timer.h"

namespace tessera::comm {
namespace {

uint64_t load(const uint64_t& word) {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(word)).load(std::memory_order_acquire);
}
void store(uint64_t& word, uint64_t value) {
  std::atomic_ref<uint64_t>(word).store(value, std::memory_order_release);
}

GroupProgress decode(const uint64_t* words, int history) {
  GroupProgress p;
  p.entered = words[0];
  p.completed = words[1];
  for (int i = 0; i < history; ++i) {
    const uint64_t key = words[2 + 2 * i];
    if (key == 0) continue;
    p.recent.push_back({(key >> 8) - 1, CommOp(key & 0xff), words[3 + 2 * i]});
  }
  return p;
}

}  // namespace

std::optional<BoardEntry> GroupProgress::find(uint64_t seq) const {
  for (const auto& e : recent)
    if (e.seq == seq) return e;
  return std::nullopt;
}

ProgressBoard::ProgressBoard(MPI_Comm world) {
  MPI_Comm_rank(world, &my_rank_);
  const MPI_Aint bytes = MPI_Aint(kMaxGroups) * kSlotWords * sizeof(uint64_t);
  MPI_Win_allocate(bytes, sizeof(uint64_t), MPI_INFO_NULL, world, &base_, &window_);
  std::fill(base_, base_ + size_t(kMaxGroups) * kSlotWords, 0);
  int* model = nullptr;
  int found = 0;
  MPI_Win_get_attr(window_, MPI_WIN_MODEL, &model, &found);
  separate_model_ = found && *model == MPI_WIN_SEPARATE;
  MPI_Barrier(world);  // every board zeroed before anyone reads one
  // One passive-target epoch for the window's whole life: readers never lock
  // (a lock could wait on the target) and NOCHECK promises no exclusive locks.
  MPI_Win_lock_all(MPI_MODE_NOCHECK, window_);
}

ProgressBoard::~ProgressBoard() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || window_ == MPI_WIN_NULL) return;
  MPI_Win_unlock_all(window_);
  MPI_Win_free(&window_);
}

void ProgressBoard::sync_if_separate() const {
  if (separate_model_) MPI_Win_sync(window_);
}

void ProgressBoard::publish_entered(int group_id, uint64_t seq, CommOp op, uint64_t bytes) {
  uint64_t* s = slot(group_id);
  uint64_t* entry = s + 2 + 2 * (seq % kHistory);
  store(entry[0], 0);  // invalidate first so a reader never pairs new key with old bytes
  store(entry[1], bytes);
  store(entry[0], ((seq + 1) << 8) | uint64_t(op));
  if (load(s[0]) < seq + 1) store(s[0], seq + 1);
  sync_if_separate();
}

void ProgressBoard::publish_completed(int group_id, uint64_t seq) {
  uint64_t* s = slot(group_id);
  if (load(s[1]) < seq + 1) store(s[1], seq + 1);
  sync_if_separate();
}

std::optional<GroupProgress> ProgressBoard::read(int world_rank, int group_id,
                                                 double timeout_s) const {
  TESSERA_CHECK(group_id >= 0 && group_id < kMaxGroups, "progress board: bad group id {}",
                group_id);
  if (world_rank == my_rank_) {
    std::array<uint64_t, kSlotWords> copy;
    for (int i = 0; i < kSlotWords; ++i) copy[size_t(i)] = load(slot(group_id)[i]);
    return decode(copy.data(), kHistory);
  }
  // Heap-allocated: if the read never completes the request still owns it,
  // and it must outlive this call (the caller aborts the job soon after).
  auto* words = new std::array<uint64_t, kSlotWords>{};
  MPI_Request request;
  MPI_Rget(words->data(), kSlotWords, MPI_UINT64_T, world_rank,
           MPI_Aint(group_id) * kSlotWords, kSlotWords, MPI_UINT64_T, window_, &request);
  const double deadline = now_seconds() + timeout_s;
  int done = 0;
  while (true) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done || now_seconds() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!done) return std::nullopt;  // leaks `words` on purpose, see above
  GroupProgress progress = decode(words->data(), kHistory);
  delete words;
  return progress;
}

}  // namespace tessera::comm

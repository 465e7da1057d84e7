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

// Up to 8 characters of a name in one word, and back.
uint64_t pack_name(const std::string& name) {
  uint64_t word = 0;
  for (size_t i = 0; i < std::min<size_t>(name.size(), 8); ++i)
    word |= uint64_t(static_cast<unsigned char>(name[i])) << (8 * i);
  return word;
}
std::string unpack_name(uint64_t word) {
  std::string name;
  for (; word != 0; word >>= 8) name.push_back(char(word & 0xff));
  return name;
}

// Members as (first, stride, count) when they are an arithmetic progression.
std::array<uint64_t, 3> pack_members(const std::vector<int>& ranks) {
  if (ranks.empty()) return {0, 0, 0};
  const int stride = ranks.size() > 1 ? ranks[1] - ranks[0] : 1;
  for (size_t i = 1; i < ranks.size(); ++i)
    if (ranks[i] - ranks[i - 1] != stride) return {0, 0, 0};
  return {uint64_t(ranks[0]), uint64_t(int64_t(stride)), uint64_t(ranks.size())};
}

GroupProgress decode(const uint64_t* words, int history) {
  GroupProgress p;
  p.entered = words[0];
  p.completed = words[1];
  p.name = unpack_name(words[2]);
  // A bound on the count: a torn or garbled slot must not allocate without
  // end; unsigned arithmetic, so garbage wraps instead of overflowing (the
  // reader drops ranks outside the world).
  const uint64_t count = std::min<uint64_t>(words[5], 1u << 20);
  for (uint64_t i = 0; i < count; ++i) p.members.push_back(int(words[3] + i * words[4]));
  for (int i = 0; i < history; ++i) {
    const uint64_t key = words[6 + 2 * i];
    if (key == 0) continue;
    p.recent.push_back({(key >> 8) - 1, CommOp(key & 0xff), words[7 + 2 * i]});
  }
  return p;
}

RankStatus decode_status(const uint64_t* words, int max_waiting) {
  RankStatus s;
  s.heartbeat = words[0];
  const int count = int(std::min<uint64_t>(words[1], uint64_t(max_waiting)));
  for (int i = 0; i < count; ++i) {
    const uint64_t* w = words + 2 + 3 * i;
    s.waiting.push_back({int(w[0] >> 8), w[1], CommOp(w[0] & 0xff), int(w[2] - 1)});
  }
  return s;
}

}  // namespace

std::optional<BoardEntry> GroupProgress::find(uint64_t seq) const {
  for (const auto& e : recent)
    if (e.seq == seq) return e;
  return std::nullopt;
}

ProgressBoard::ProgressBoard(MPI_Comm world) {
  MPI_Comm_rank(world, &my_rank_);
  MPI_Comm_size(world, &world_size_);
  const MPI_Aint bytes = MPI_Aint(kMaxGroups + 1) * kSlotWords * sizeof(uint64_t);
  MPI_Win_allocate(bytes, sizeof(uint64_t), MPI_INFO_NULL, world, &base_, &window_);
  std::fill(base_, base_ + size_t(kMaxGroups + 1) * kSlotWords, 0);
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
  uint64_t* entry = s + kHeaderWords + 2 * (seq % kHistory);
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

void ProgressBoard::publish_group(int group_id, const std::string& name,
                                  const std::vector<int>& world_ranks) {
  uint64_t* s = slot(group_id);
  const auto members = pack_members(world_ranks);
  store(s[2], pack_name(name));
  for (int i = 0; i < 3; ++i) store(s[3 + i], members[size_t(i)]);
  sync_if_separate();
}

void ProgressBoard::publish_status(uint64_t heartbeat, const std::vector<WaitingCall>& waiting) {
  uint64_t* s = slot(kStatusSlot);
  const size_t count = std::min(waiting.size(), size_t(kMaxWaiting));
  for (size_t i = 0; i < count; ++i) {
    const WaitingCall& c = waiting[i];
    store(s[2 + 3 * i], uint64_t(c.group_id) << 8 | uint64_t(c.op));
    store(s[3 + 3 * i], c.seq);
    store(s[4 + 3 * i], uint64_t(int64_t(c.peer) + 1));
  }
  store(s[1], count);
  store(s[0], heartbeat);  // last: a moving heartbeat vouches for the words before it
  sync_if_separate();
}

bool ProgressBoard::read_slot(int world_rank, int slot_index, double timeout_s,
                              uint64_t* out) const {
  if (world_rank == my_rank_) {
    for (int i = 0; i < kSlotWords; ++i) out[i] = load(slot(slot_index)[i]);
    return true;
  }
  if (world_rank < 0 || world_rank >= world_size_) return false;  // a garbled member or peer
  // Heap-allocated: if the read never completes the request still owns it,
  // and it must outlive this call (the caller aborts the job soon after).
  auto* words = new std::array<uint64_t, kSlotWords>{};
  MPI_Request request;
  MPI_Rget(words->data(), kSlotWords, MPI_UINT64_T, world_rank,
           MPI_Aint(slot_index) * kSlotWords, kSlotWords, MPI_UINT64_T, window_, &request);
  const double deadline = now_seconds() + timeout_s;
  int done = 0;
  while (true) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done || now_seconds() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!done) return false;  // leaks `words` on purpose, see above
  std::copy(words->begin(), words->end(), out);
  delete words;
  return true;
}

std::optional<GroupProgress> ProgressBoard::read(int world_rank, int group_id,
                                                 double timeout_s) const {
  TESSERA_CHECK(group_id >= 0 && group_id < kMaxGroups, "progress board: bad group id {}",
                group_id);
  std::array<uint64_t, kSlotWords> words;
  if (!read_slot(world_rank, group_id, timeout_s, words.data())) return std::nullopt;
  return decode(words.data(), kHistory);
}

std::optional<RankStatus> ProgressBoard::read_status(int world_rank, double timeout_s) const {
  std::array<uint64_t, kSlotWords> words;
  if (!read_slot(world_rank, kStatusSlot, timeout_s, words.data())) return std::nullopt;
  return decode_status(words.data(), kMaxWaiting);
}

}  // namespace tessera::comm

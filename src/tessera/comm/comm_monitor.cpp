#include "tessera/comm/comm_monitor.h"

#include "tessera/core/error.h"

namespace tessera::comm {

CommMonitor::CommMonitor(int world_rank, size_t log_capacity,
                         std::unique_ptr<ProgressBoard> board)
    : log_(log_capacity, world_rank), board_(std::move(board)) {}

int CommMonitor::next_group_id() const {
  std::lock_guard lock(mutex_);
  return next_group_id_;
}

void CommMonitor::register_group(int id, GroupInfo info) {
  TESSERA_CHECK(id < ProgressBoard::kMaxGroups,
                "too many communication groups created ({}; the progress board holds {})",
                id + 1, ProgressBoard::kMaxGroups);
  std::lock_guard lock(mutex_);
  if (board_) board_->publish_group(id, info.name, info.world_ranks);
  groups_[id] = std::move(info);
  if (next_group_id_ <= id) next_group_id_ = id + 1;
}

std::optional<GroupInfo> CommMonitor::group(int id) const {
  std::lock_guard lock(mutex_);
  auto it = groups_.find(id);
  if (it == groups_.end()) return std::nullopt;
  return it->second;
}

void CommMonitor::publish_status() {
  if (!board_) return;
  std::vector<WaitingCall> waiting;
  for (const auto& r : log_.in_flight(ProgressBoard::kMaxWaiting))
    waiting.push_back({r.group_id, r.seq, r.op, is_collective(r.op) ? -1 : r.peer});
  std::lock_guard lock(mutex_);
  board_->publish_status(++heartbeat_, waiting);
}

}  // namespace tessera::comm

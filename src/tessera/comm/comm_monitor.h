// CommMonitor: what one rank knows about its own communication, shared by all
// of its groups: the call log, the progress board other ranks read, and a
// directory of its groups (id -> name, members) for the watchdog's report.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tessera/comm/collective_log.h"
#include "tessera/comm/progress_board.h"

namespace tessera::comm {

struct GroupInfo {
  std::string name;
  std::vector<int> world_ranks;  // members, in group-rank order
};

class CommMonitor {
 public:
  // `board` may be null (a single-process backend has nobody to tell).
  CommMonitor(int world_rank, size_t log_capacity, std::unique_ptr<ProgressBoard> board);

  CollectiveLog& log() { return log_; }
  const CollectiveLog& log() const { return log_; }
  ProgressBoard* board() const { return board_.get(); }
  int world_rank() const { return log_.world_rank(); }
  // Frees the board (collective: MPI_Win_free). Calls after this still log.
  void close_board() { board_.reset(); }

  // Group ids index the progress board, so the members of a group must agree
  // on one: each proposes next_group_id() and they take the maximum.
  int next_group_id() const;
  void register_group(int id, GroupInfo info);  // also advances next_group_id
  std::optional<GroupInfo> group(int id) const;

  // The watchdog thread's beat: a heartbeat and the calls this rank waits in,
  // on the board, for other ranks' watchdogs to tell stopped from waiting.
  void publish_status();

 private:
  CollectiveLog log_;
  std::unique_ptr<ProgressBoard> board_;
  mutable std::mutex mutex_;
  std::map<int, GroupInfo> groups_;
  int next_group_id_ = 0;
  uint64_t heartbeat_ = 0;  // guarded by mutex_
};

}  // namespace tessera::comm

// CollectiveLog: every communication call of one rank, in a ring buffer, plus
// the byte counters the step metrics read.
//
// Two readers: the watchdog (which calls are in flight and for how long,
// and the last entries to print when one hangs) and StepStats (bytes and
// seconds per op and per group since the last reset). One log per rank,
// shared by all of that rank's groups, so the printout interleaves them in
// the order the rank issued them.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/comm/comm_op.h"

namespace tessera::comm {

struct CollectiveRecord {
  uint64_t id = 0;       // position in this rank's log, 0, 1, 2, ...
  uint64_t seq = 0;      // collectives: number within the group (same on every member);
                         // send/recv: this rank's own count on the group
  CommOp op = CommOp::Barrier;
  bool async = false;
  int group_id = 0;      // the group's slot on the progress board
  std::string group;     // the group's name
  int group_rank = 0;
  int group_size = 1;
  int peer = -1;         // send/recv peer, broadcast root (world rank); -1 if none
  size_t bytes = 0;      // data size S (see comm_op.h for the conventions)
  double issued = 0;     // now_seconds() when the caller issued it
  double start = 0;      // when it entered the transport (0 = still queued)
  double end = 0;        // when it completed (0 = in flight)
};

struct OpCounters {
  uint64_t calls = 0;
  uint64_t bytes = 0;       // sum of data sizes S
  double wire_bytes = 0;    // sum of S * bus_factor: bytes each rank sent
  double seconds = 0;       // sum of start->end times
};

struct CommCounters {
  std::array<OpCounters, kNumCommOps> by_op{};
  std::map<std::string, std::array<OpCounters, kNumCommOps>> by_group;

  const OpCounters& operator[](CommOp op) const { return by_op[size_t(op)]; }
  uint64_t total_bytes() const;
  double total_wire_bytes() const;
};

class CollectiveLog {
 public:
  explicit CollectiveLog(size_t capacity = 1024, int world_rank = 0);

  // Records a call as issued; returns its id for the two calls below.
  uint64_t begin(CollectiveRecord record);
  void mark_started(uint64_t id, double when);
  void finish(uint64_t id, double when);

  int world_rank() const { return world_rank_; }
  size_t capacity() const { return ring_.size(); }
  uint64_t recorded() const;  // calls recorded so far, including overwritten ones

  // The newest `count` records, oldest first.
  std::vector<CollectiveRecord> last(size_t count) const;
  // Records started before `now - timeout` and not finished.
  std::vector<CollectiveRecord> overdue(double now, double timeout) const;
  // Up to `count` records started and not finished, newest first.
  std::vector<CollectiveRecord> in_flight(size_t count) const;

  CommCounters counters() const;
  void reset_counters();

 private:
  mutable std::mutex mutex_;
  std::vector<CollectiveRecord> ring_;
  uint64_t next_id_ = 0;
  int world_rank_ = 0;
  CommCounters counters_;
};

// A table of records for a human: one line each, start times relative to
// `now` (negative: seconds ago).
std::string format_records(const std::vector<CollectiveRecord>& records, double now);

}  // namespace tessera::comm

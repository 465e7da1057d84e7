// Following a hang from the call this rank is stuck in to the rank it starts at.
//
// A stuck collective waits directly on the members that have not entered it
// (behind), that entered something else (mismatch), that do not answer, and
// on those that entered it but never completed it (they wait too, or they
// stopped inside it). A stuck send/recv waits on its peer. Each rank's
// status slot on the progress board (progress_board.h) says what it waits
// in, so the waits can be followed rank to rank: rank 1's recv from rank 3,
// rank 3's tp all-reduce with rank 2, rank 2 ... until a rank that waits on
// nobody. That rank is where the hang starts:
//   - stopped: its heartbeat stood still across the stall window (SIGSTOP,
//     a debugger, a frozen node), whatever it was in;
//   - busy: it runs but waits in no call (computing, a stuck kernel);
//   - silent: its board did not answer.
// Ranks that wait in a call whose every member entered it and runs lead
// nowhere; a cycle (a mismatch deadlock) has no root.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tessera/comm/progress_board.h"

namespace tessera::comm {

// Where the tracer reads other ranks' boards (ProgressBoard, or a fake in tests).
class BoardReader {
 public:
  virtual ~BoardReader() = default;
  virtual std::optional<GroupProgress> group(int world_rank, int group_id) const = 0;
  virtual std::optional<RankStatus> status(int world_rank) const = 0;
};

enum class RootKind { Stopped, Busy, Silent, NoWatchdog };

struct HangRoot {
  int rank = -1;
  RootKind kind = RootKind::Busy;
  std::string path;  // "world rank 1 --recv from world rank 3 on 'pp'--> world rank 3 --..."
};

struct HangTrace {
  std::vector<HangRoot> roots;  // in the order found (nearest first)
  std::vector<int> stopped;     // every rank seen whose heartbeat stood still
  bool is_stopped(int rank) const;
};

// `mine`: the calls `me` waits in, the stuck one first (a rank stuck in an
// async recv may be held up by the blocking collective it is in since);
// `let_time_pass` is called once between the two reads of every status (the
// stall window).
HangTrace trace_hang(int me, const std::vector<WaitingCall>& mine, const BoardReader& board,
                     const std::function<void()>& let_time_pass);

// "all_reduce #12 on 'tp'" / "recv from world rank 3 on 'pp'".
std::string describe_waiting(const WaitingCall& call, const std::string& group_name);

std::string_view root_kind_text(RootKind kind);

}  // namespace tessera::comm

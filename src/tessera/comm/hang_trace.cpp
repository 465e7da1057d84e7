#include "tessera/comm/hang_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>

namespace tessera::comm {
namespace {

// A bound on the ranks one trace reads (two status reads each, and the
// members of the groups they wait in), so a report on a huge job stays quick.
constexpr size_t kMaxTracedRanks = 4096;

struct Edge {
  int to = -1;
  std::string via;  // the call the waiting rank is in
};

class Tracer {
 public:
  explicit Tracer(const BoardReader& board) : board_(board) {}

  // Whom `rank` waits on in `call`: every member of the group that has not
  // completed it (behind, in another collective, silent, or in it too), or
  // the peer of a send/recv.
  std::vector<Edge> blockers(int rank, const WaitingCall& call) {
    if (call.group_id < 0 || call.group_id >= ProgressBoard::kMaxGroups) return {};
    const auto& own = group(rank, call.group_id);
    const std::string via = describe_waiting(call, own ? own->name : "?");
    if (!is_collective(call.op)) {
      if (call.peer < 0) return {};
      return {{call.peer, via}};
    }
    if (!own) return {};
    std::vector<Edge> out;
    for (int member : own->members) {
      if (member == rank) continue;
      const auto& theirs = group(member, call.group_id);
      if (!theirs || theirs->completed <= call.seq) out.push_back({member, via});
    }
    return out;
  }

 private:
  const std::optional<GroupProgress>& group(int rank, int group_id) {
    const auto key = std::make_pair(rank, group_id);
    auto it = cache_.find(key);
    if (it == cache_.end()) it = cache_.emplace(key, board_.group(rank, group_id)).first;
    return it->second;
  }

  const BoardReader& board_;
  std::map<std::pair<int, int>, std::optional<GroupProgress>> cache_;  // (rank, group id)
};

}  // namespace

bool HangTrace::is_stopped(int rank) const {
  return std::find(stopped.begin(), stopped.end(), rank) != stopped.end();
}

std::string describe_waiting(const WaitingCall& call, const std::string& group_name) {
  if (is_collective(call.op))
    return fmt::format("{} #{} on '{}'", comm_op_name(call.op), call.seq, group_name);
  return fmt::format("{} {} world rank {} on '{}'", comm_op_name(call.op),
                     call.op == CommOp::Send ? "to" : "from", call.peer, group_name);
}

std::string_view root_kind_text(RootKind kind) {
  switch (kind) {
    case RootKind::Stopped:
      return "STOPPED: its process did not run during the stall window (SIGSTOP, a debugger, "
             "a frozen node)";
    case RootKind::Busy: return "BUSY outside communication (computing, or a stuck kernel)";
    case RootKind::Silent: return "its progress board does not answer";
    case RootKind::NoWatchdog: return "runs no watchdog, so its state is unknown";
  }
  return "?";
}

HangTrace trace_hang(int me, const std::vector<WaitingCall>& mine, const BoardReader& board,
                     const std::function<void()>& let_time_pass) {
  Tracer tracer(board);
  std::map<int, std::vector<Edge>> edges;           // rank -> whom it waits on
  std::map<int, std::optional<RankStatus>> first;   // status at the first read
  std::vector<int> order;                           // ranks in the order reached
  std::set<int> reached{me};
  std::deque<int> queue;
  auto reach = [&](const std::vector<Edge>& out) {
    for (const Edge& e : out)
      if (reached.size() < kMaxTracedRanks && reached.insert(e.to).second) {
        queue.push_back(e.to);
        order.push_back(e.to);
      }
  };

  // Breadth first from this rank's calls, through what each rank waits in.
  for (const WaitingCall& call : mine) {
    auto more = tracer.blockers(me, call);
    edges[me].insert(edges[me].end(), more.begin(), more.end());
  }
  reach(edges[me]);
  while (!queue.empty()) {
    const int rank = queue.front();
    queue.pop_front();
    auto& status = first[rank] = board.status(rank);
    if (!status) continue;
    auto& out = edges[rank];
    for (const WaitingCall& call : status->waiting) {
      auto more = tracer.blockers(rank, call);
      out.insert(out.end(), more.begin(), more.end());
    }
    reach(out);
  }

  // Then who moved during the stall window.
  if (!order.empty()) let_time_pass();
  HangTrace trace;
  std::map<int, std::optional<RootKind>> root;  // nullopt: waits on others
  for (int rank : order) {
    const auto& before = first[rank];
    const auto after = before ? board.status(rank) : std::nullopt;
    if (!before || !after) {
      root[rank] = RootKind::Silent;
    } else if (before->heartbeat == 0 && after->heartbeat == 0) {
      root[rank] = RootKind::NoWatchdog;
    } else if (after->heartbeat == before->heartbeat) {
      root[rank] = RootKind::Stopped;
      trace.stopped.push_back(rank);
    } else if (before->waiting.empty() && after->waiting.empty()) {
      root[rank] = RootKind::Busy;
    } else {
      root[rank] = std::nullopt;
    }
  }

  // The roots, nearest first, each with the first path that reaches it.
  std::map<int, std::string> path{{me, fmt::format("world rank {}", me)}};
  std::deque<int> frontier{me};
  while (!frontier.empty()) {
    const int rank = frontier.front();
    frontier.pop_front();
    for (const Edge& e : edges[rank]) {
      if (path.count(e.to) || !root.count(e.to)) continue;
      path[e.to] = fmt::format("{} --{}--> world rank {}", path[rank], e.via, e.to);
      if (root[e.to])
        trace.roots.push_back({e.to, *root[e.to], path[e.to]});
      else
        frontier.push_back(e.to);
    }
  }
  return trace;
}

}  // namespace tessera::comm

#include "tessera/comm/watchdog.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "tessera/comm/hang_trace.h"
#include "tessera/core/timer.h"

namespace tessera::comm {

Watchdog::Watchdog(std::shared_ptr<CommMonitor> monitor, WatchdogOptions options, OnHang on_hang)
    : monitor_(std::move(monitor)), options_(options), on_hang_(std::move(on_hang)) {
  thread_ = std::thread([this] { run(); });
  beat_thread_ = std::thread([this] { beat(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  beat_thread_.join();
}

double watchdog_period_s(double timeout_s) { return std::clamp(timeout_s / 4, 0.01, 0.25); }

void Watchdog::beat() {
  // Its own thread, so that the beat goes on while run() writes a report
  // (reads, the stall window) and waits out the grace before the abort: a
  // rank that reports is waiting, not stopped.
  const auto period = std::chrono::duration<double>(watchdog_period_s(options_.timeout_s));
  std::unique_lock lock(mutex_);
  do {
    lock.unlock();
    monitor_->publish_status();
    lock.lock();
  } while (!wake_.wait_for(lock, period, [this] { return stopping_; }));
}

void Watchdog::run() {
  // Four checks per timeout bound the detection delay to 1.25x the timeout;
  // at least four a second keep the heartbeat quick to read. Each costs one
  // mutex, a scan of the ring and a few stores to the board.
  const auto period = std::chrono::duration<double>(watchdog_period_s(options_.timeout_s));
  std::unique_lock lock(mutex_);
  double last_wake = now_seconds();
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
    const double now = now_seconds();
    // Woken far too late: this whole process stood still (SIGSTOP, a
    // debugger; or the launcher's SIGCONT before it kills a stopped rank).
    // Its calls aged without it; give them a fresh look rather than blame
    // the ranks that kept running.
    const bool was_stopped = now - last_wake > options_.stall_window_s;
    last_wake = now;
    if (was_stopped) continue;
    auto overdue = monitor_->log().overdue(now, options_.timeout_s);
    if (overdue.empty()) continue;
    const auto oldest = std::min_element(overdue.begin(), overdue.end(),
                                         [](const auto& a, const auto& b) { return a.id < b.id; });
    lock.unlock();  // the beat thread shares the mutex; reporting takes seconds
    const std::string report = describe_hang(*oldest, *monitor_, now, options_);
    on_hang_(report);
    return;  // one report per hang; on_hang normally ends the process
  }
}

namespace {

std::string describe_call(CommOp op, uint64_t seq, uint64_t bytes) {
  return fmt::format("{} #{} ({} bytes)", comm_op_name(op), seq, bytes);
}

class ProgressBoardReader final : public BoardReader {
 public:
  ProgressBoardReader(const ProgressBoard& board, double timeout_s)
      : board_(board), timeout_s_(timeout_s) {}
  std::optional<GroupProgress> group(int world_rank, int group_id) const override {
    return board_.read(world_rank, group_id, timeout_s_);
  }
  std::optional<RankStatus> status(int world_rank) const override {
    return board_.read_status(world_rank, timeout_s_);
  }

 private:
  const ProgressBoard& board_;
  double timeout_s_;
};

// Follows the waits from the stuck call and this rank's other calls in
// flight (hang_trace.h); the stall window is long enough for eight
// heartbeats of a running rank.
HangTrace trace_from(const CollectiveRecord& stuck, const CommMonitor& monitor,
                     const WatchdogOptions& options, double* stall_s) {
  *stall_s = std::max(options.stall_window_s, 8 * watchdog_period_s(options.timeout_s));
  auto waiting_call = [](const CollectiveRecord& r) {
    return WaitingCall{r.group_id, r.seq, r.op, is_collective(r.op) ? -1 : r.peer};
  };
  std::vector<WaitingCall> mine{waiting_call(stuck)};
  for (const auto& r : monitor.log().in_flight(ProgressBoard::kMaxWaiting))
    if (r.id != stuck.id) mine.push_back(waiting_call(r));
  const ProgressBoardReader reader(*monitor.board(), options.board_read_timeout_s);
  return trace_hang(monitor.world_rank(), mine, reader, [&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(*stall_s));
  });
}

}  // namespace

std::string describe_hang(const CollectiveRecord& stuck, const CommMonitor& monitor, double now,
                          const WatchdogOptions& options) {
  const int me = monitor.world_rank();
  std::string out = fmt::format(
      "tessera: comm watchdog on world rank {}: {} on group '{}' has not completed after {:.1f} s "
      "(--comm-timeout {} s)\n",
      me, describe_call(stuck.op, stuck.seq, stuck.bytes), stuck.group, now - stuck.start,
      options.timeout_s);

  std::vector<int> behind, mismatched, silent;
  const auto group = monitor.group(stuck.group_id);
  HangTrace trace;
  double stall_s = 0;
  if (monitor.board()) trace = trace_from(stuck, monitor, options, &stall_s);
  const auto stopped_note = [&](int rank) {
    return trace.is_stopped(rank)
               ? fmt::format(", and it is STOPPED (its process did not run for {:.1f} s)", stall_s)
               : std::string();
  };
  if (!is_collective(stuck.op)) {
    // Point-to-point: the only rank that can complete it is the peer.
    out += fmt::format("  waiting for world rank {} to post the matching {}{}\n", stuck.peer,
                       stuck.op == CommOp::Send ? "recv" : "send", stopped_note(stuck.peer));
    behind.push_back(stuck.peer);
  } else if (!group || !monitor.board()) {
    out += "  (no progress board: cannot tell which ranks are behind)\n";
  } else {
    for (int rank : group->world_ranks) {
      if (rank == me) continue;
      const auto progress = monitor.board()->read(rank, stuck.group_id, options.board_read_timeout_s);
      if (!progress) {
        silent.push_back(rank);
        out += fmt::format("  world rank {}: no answer from its progress board within {} s\n",
                           rank, options.board_read_timeout_s);
        continue;
      }
      if (progress->entered <= stuck.seq) {
        behind.push_back(rank);
        const auto last = progress->entered ? progress->find(progress->entered - 1) : std::nullopt;
        out += fmt::format("  world rank {}: BEHIND, entered {} collectives on '{}' (last: {}); this "
                           "rank waits in #{}{}\n",
                           rank, progress->entered, stuck.group,
                           last ? describe_call(last->op, last->seq, last->bytes) : "none",
                           stuck.seq, stopped_note(rank));
        continue;
      }
      if (progress->completed <= stuck.seq && trace.is_stopped(rank)) {
        // In it too, maybe long since (an async call posted early), but it
        // will never finish it: as much behind as one that never came.
        behind.push_back(rank);
        out += fmt::format("  world rank {}: BEHIND, entered #{} ({} entered, {} completed on '{}'){}\n",
                           rank, stuck.seq, progress->entered, progress->completed, stuck.group,
                           stopped_note(rank));
        continue;
      }
      const auto theirs = progress->find(stuck.seq);
      if (theirs && (theirs->op != stuck.op || theirs->bytes != stuck.bytes)) {
        mismatched.push_back(rank);
        out += fmt::format("  world rank {}: MISMATCH, its collective #{} on '{}' is {}, here it is {}\n",
                           rank, stuck.seq, stuck.group,
                           describe_call(theirs->op, theirs->seq, theirs->bytes),
                           describe_call(stuck.op, stuck.seq, stuck.bytes));
      } else {
        out += fmt::format("  world rank {}: entered #{} too ({} entered, {} completed on '{}')\n",
                           rank, stuck.seq, progress->entered, progress->completed, stuck.group);
      }
    }
  }
  if (!behind.empty())
    out += fmt::format("tessera: ranks behind on group '{}': world rank {}\n", stuck.group,
                       fmt::join(behind, ", "));
  if (!mismatched.empty())
    out += fmt::format("tessera: mismatched collective sequence on group '{}' between world rank {} "
                       "and world rank {}\n",
                       stuck.group, me, fmt::join(mismatched, ", "));
  if (!silent.empty())
    out += fmt::format("tessera: no answer from world rank {}\n", fmt::join(silent, ", "));
  // Each line names the waiting rank, so it stays readable when the ranks'
  // reports interleave.
  for (const HangRoot& root : trace.roots)
    out += fmt::format("tessera: world rank {} waits on world rank {}, {}: {}\n", me, root.rank,
                       root_kind_text(root.kind), root.path);
  if (monitor.board() && trace.roots.empty() && mismatched.empty())
    out += fmt::format("tessera: world rank {}: no rank found that the others wait on\n", me);
  out += fmt::format("tessera: last {} communication calls on world rank {}:\n",
                     std::min<uint64_t>(options.log_lines, monitor.log().recorded()), me);
  out += format_records(monitor.log().last(options.log_lines), now);
  return out;
}

}  // namespace tessera::comm

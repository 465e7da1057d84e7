#include "tessera/comm/watchdog.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>

#include "tessera/core/timer.h"

namespace tessera::comm {

Watchdog::Watchdog(std::shared_ptr<CommMonitor> monitor, WatchdogOptions options, OnHang on_hang)
    : monitor_(std::move(monitor)), options_(options), on_hang_(std::move(on_hang)) {
  thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Watchdog::run() {
  // Checking four times per period bounds the detection delay to 1.25x the
  // timeout without measurable cost (one mutex and a scan of the ring).
  const auto period = std::chrono::duration<double>(std::clamp(options_.timeout_s / 4, 0.01, 1.0));
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
    const double now = now_seconds();
    auto overdue = monitor_->log().overdue(now, options_.timeout_s);
    if (overdue.empty()) continue;
    const auto oldest = std::min_element(overdue.begin(), overdue.end(),
                                         [](const auto& a, const auto& b) { return a.id < b.id; });
    const std::string report = describe_hang(*oldest, *monitor_, now, options_);
    on_hang_(report);
    return;  // one report per hang; on_hang normally ends the process
  }
}

namespace {

std::string describe_call(CommOp op, uint64_t seq, uint64_t bytes) {
  return fmt::format("{} #{} ({} bytes)", comm_op_name(op), seq, bytes);
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
  if (!is_collective(stuck.op)) {
    // Point-to-point: the only rank that can complete it is the peer.
    out += fmt::format("  waiting for world rank {} to post the matching {}\n", stuck.peer,
                       stuck.op == CommOp::Send ? "recv" : "send");
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
                           "rank waits in #{}\n",
                           rank, progress->entered, stuck.group,
                           last ? describe_call(last->op, last->seq, last->bytes) : "none",
                           stuck.seq);
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
  out += fmt::format("tessera: last {} communication calls on world rank {}:\n",
                     std::min<uint64_t>(options.log_lines, monitor.log().recorded()), me);
  out += format_records(monitor.log().last(options.log_lines), now);
  return out;
}

}  // namespace tessera::comm

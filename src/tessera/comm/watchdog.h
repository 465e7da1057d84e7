// Watchdog: turns a hung collective into a diagnosis and a clean abort.
//
// One thread publishes the rank's heartbeat and what it waits in on its
// ProgressBoard a few times a second; another wakes as often and asks the
// rank's CollectiveLog for calls in flight longer than the timeout. For the oldest such call it
// reads every group member's ProgressBoard slot and tells
//   - which ranks are behind (never entered this collective, or stopped
//     inside it: a process that stands still, SIGSTOP or a frozen node),
//   - which ranks entered a different collective at the same sequence number
//     (op or size differ: a mismatched collective sequence),
//   - which ranks did not answer,
// then follows the waits rank to rank to the one the hang starts at
// (hang_trace.h), even when that rank is in none of this rank's groups,
// prints that with the last entries of the rank's log, and hands the report
// to `on_hang`, which in the MPI runtime aborts the whole job (MPI_Abort)
// after a grace period. Each rank that is stuck runs its own watchdog, so
// every rank that can prints its view before the first abort takes the job
// down.
#pragma once
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tessera/comm/comm_monitor.h"

namespace tessera::comm {

struct WatchdogOptions {
  double timeout_s = 0;           // a call in flight longer than this is a hang
  double board_read_timeout_s = 2;  // how long to wait for another rank's board
  size_t log_lines = 16;          // log entries printed with the report
  // A rank whose heartbeat does not move for this long is stopped. The
  // heartbeat beats every min(timeout_s / 4, 0.25) s, so 2 s is eight beats
  // at least: a loaded machine delays a thread by far less.
  double stall_window_s = 2;
};

// How often the watchdog thread wakes (and beats) for a timeout.
double watchdog_period_s(double timeout_s);

class Watchdog {
 public:
  using OnHang = std::function<void(const std::string& report)>;

  Watchdog(std::shared_ptr<CommMonitor> monitor, WatchdogOptions options, OnHang on_hang);
  ~Watchdog();  // stops the thread
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void run();   // checks for overdue calls, reports
  void beat();  // publishes the heartbeat and what this rank waits in

  std::shared_ptr<CommMonitor> monitor_;
  WatchdogOptions options_;
  OnHang on_hang_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
  std::thread beat_thread_;
};

// The report for one stuck call, as the watchdog prints it. Reads the other
// members' progress boards (each read bounded by options.board_read_timeout_s).
std::string describe_hang(const CollectiveRecord& stuck, const CommMonitor& monitor, double now,
                          const WatchdogOptions& options);

}  // namespace tessera::comm

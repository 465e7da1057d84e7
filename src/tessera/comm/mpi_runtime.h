// MpiRuntime: MPI's lifetime, as one RAII object owned by main().
//
// The only process-wide state of the comm layer is MPI's own (MPI_Init_thread
// .. MPI_Finalize); everything else (log, progress board, watchdog) lives in
// this object and reaches the groups through world(). Create it first, destroy
// it last: communicators must not outlive it.
//
// Thread level: MPI_THREAD_MULTIPLE, required. Three kinds of thread call MPI
// at once: the caller (blocking calls), each group's CommStream (async
// collectives), and the watchdog (MPI_Rget on the progress board while the
// caller sits inside a hung collective, then MPI_Abort). SERIALIZED would
// forbid exactly the case the watchdog exists for.
//
// A single process started without mpirun works: Open MPI's singleton init
// gives a world of one (no mpirun, no network needed).
#pragma once
#include <memory>
#include <string>

#include "tessera/comm/comm_monitor.h"
#include "tessera/comm/communicator.h"
#include "tessera/comm/watchdog.h"

namespace tessera::comm {

struct RuntimeOptions {
  size_t log_capacity = 1024;  // calls kept per rank for the hang report
};

// Exit status of a job the watchdog aborted.
inline constexpr int kWatchdogExitCode = 124;

class MpiRuntime {
 public:
  MpiRuntime(int* argc, char*** argv, RuntimeOptions options = {});
  ~MpiRuntime();  // stops the watchdog, frees the board, MPI_Finalize
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

  // A new communicator over all ranks, named "world" (collective).
  std::unique_ptr<Communicator> world();

  // Starts the hang watchdog (--comm-timeout S); 0 stops it. Per rank, not
  // collective, but every rank should use the same S.
  void set_comm_timeout(double seconds, WatchdogOptions options = {});

  CollectiveLog& log() { return monitor_->log(); }
  const std::shared_ptr<CommMonitor>& monitor() const { return monitor_; }

  // Ends every rank of the job now: for errors only this rank has seen,
  // where returning would leave the others waiting in a collective.
  [[noreturn]] static void abort(const std::string& message, int exit_code);

 private:
  int world_rank_ = 0;
  int world_size_ = 1;
  std::shared_ptr<CommMonitor> monitor_;
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace tessera::comm

#include "tessera/comm/mpi_runtime.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "tessera/comm/mpi_backend.h"
#include "tessera/comm/node_local.h"
#include "tessera/core/error.h"

namespace tessera::comm {

MpiRuntime::MpiRuntime(int* argc, char*** argv, RuntimeOptions options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  TESSERA_CHECK(!initialized, "MPI is already initialized: create one MpiRuntime per process");
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    fail("this MPI library provides thread level {} but tessera needs MPI_THREAD_MULTIPLE ({}) "
         "for its watchdog and communication threads",
         provided, MPI_THREAD_MULTIPLE);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  // Counted now, with every rank here, and kept: the start-up checks read it
  // inside agree(), where a rank that already failed would not join (node_local.h).
  ranks_on_this_node();
  monitor_ = std::make_shared<CommMonitor>(world_rank_, options.log_capacity,
                                           std::make_unique<ProgressBoard>(MPI_COMM_WORLD));
}

MpiRuntime::~MpiRuntime() {
  watchdog_.reset();
  // The board's window is freed collectively here, so every rank must reach
  // this destructor; a rank that cannot should call abort() instead.
  monitor_->close_board();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::unique_ptr<Communicator> MpiRuntime::world() {
  return std::make_unique<Communicator>(std::make_unique<MpiBackend>(MPI_COMM_WORLD), "world",
                                        monitor_);
}

void MpiRuntime::set_comm_timeout(double seconds, WatchdogOptions options) {
  watchdog_.reset();
  if (seconds <= 0) return;
  options.timeout_s = seconds;
  // The first rank to abort takes the job down, and the other stuck ranks
  // detect the hang up to a quarter timeout later (their calls started at
  // other times, their watchdogs wake at other moments): a grace of half the
  // timeout (1 to 10 s) lets each print its own view first.
  const double grace_s = std::clamp(seconds / 2, 1.0, 10.0);
  watchdog_ = std::make_unique<Watchdog>(monitor_, options, [grace_s](const std::string& report) {
    std::fprintf(stderr, "%s", report.c_str());
    std::fflush(stderr);
    std::this_thread::sleep_for(std::chrono::duration<double>(grace_s));
    abort("tessera: aborting the job: a collective exceeded --comm-timeout", kWatchdogExitCode);
  });
}

void MpiRuntime::abort(const std::string& message, int exit_code) {
  std::fflush(stdout);  // the log lines printed so far are not lost with the process
  if (!message.empty()) std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

}  // namespace tessera::comm

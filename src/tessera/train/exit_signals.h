// ExitSignals: SIGTERM and SIGINT become a request to stop, not a kill.
//
// While an ExitSignals is alive, the first SIGTERM or SIGINT the process
// receives is recorded (received() returns its number) and the process goes
// on: the trainer finishes the step it is in, agrees with the other ranks,
// saves and exits (--exit-signal-handler, train/exit_conditions.h). The
// handler is one-shot (SA_RESETHAND): a second signal of the same kind gets
// the default action and ends the process at once, so an impatient Ctrl-C
// still works. The destructor restores the previous handlers.
//
// A signal's disposition is process-wide, so one ExitSignals may exist at a
// time (the constructor refuses a second).
//
// Which thread runs the handler matters: see route_exit_signals_to_own_thread.
#pragma once
#include <csignal>

namespace tessera {

// Process-directed SIGTERM and SIGINT go to one thread that does nothing
// else. main() calls this first, before any other thread exists: it blocks
// the two signals in the calling thread, every thread created later (MPI's,
// OpenMP's, the comm stream's, the watchdog's) inherits the block, and the
// one thread it starts unblocks them, so the kernel can deliver them only
// there. Why: the JIT sgemm kernels of the oneDNN Debian 12 ships (2.7)
// point rsp into a heap buffer while they run, so a handler run on a thread
// inside one has its signal frame pushed onto the heap: heap corruption, an
// abort in some later free() (oneDNN issue #4845, fixed upstream in 3.11 by
// PR #4855; seen here as "corrupted size vs. prev_size" in a SIGTERM test,
// about one run in 40). Without a handler nothing changes: the default
// action, delivered to that thread, still ends the whole process. Call once.
void route_exit_signals_to_own_thread();

// In a forked child before exec: a blocked signal stays blocked across exec,
// so a program started by a routed process (a `tessera tune` trial's
// launcher) would never see SIGTERM or SIGINT. Async-signal-safe.
void unblock_exit_signals();

class ExitSignals {
 public:
  ExitSignals();
  ~ExitSignals();
  ExitSignals(const ExitSignals&) = delete;
  ExitSignals& operator=(const ExitSignals&) = delete;

  // The first signal caught (SIGTERM or SIGINT), 0 if none yet.
  static int received();

 private:
  struct sigaction old_term_ {}, old_int_ {};
};

// "SIGTERM", "SIGINT", or "a signal" for any other.
const char* signal_name(int signal);

}  // namespace tessera

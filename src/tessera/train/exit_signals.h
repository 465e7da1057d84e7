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
#pragma once
#include <csignal>

namespace tessera {

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

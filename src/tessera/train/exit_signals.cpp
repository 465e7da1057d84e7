#include "tessera/train/exit_signals.h"

#include <atomic>

#include "tessera/core/error.h"

namespace tessera {

namespace {

// Written by the handler, read by the training loop. A lock-free atomic is
// async-signal-safe; the handler may run on any thread of the process (MPI's
// and OpenMP's included), which is why it does nothing else.
std::atomic<int> g_received{0};
std::atomic<bool> g_installed{false};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_exit_signal(int signal) {
  int none = 0;
  g_received.compare_exchange_strong(none, signal);  // keep the first
}

}  // namespace

ExitSignals::ExitSignals() {
  TESSERA_CHECK(!g_installed.exchange(true), "ExitSignals: one at a time per process");
  g_received = 0;
  struct sigaction act {};
  act.sa_handler = on_exit_signal;
  sigemptyset(&act.sa_mask);
  // SA_RESTART: a system call the signal interrupts (a read, MPI's polling)
  // resumes instead of failing with EINTR in code that does not expect it.
  act.sa_flags = SA_RESTART | SA_RESETHAND;
  sigaction(SIGTERM, &act, &old_term_);
  sigaction(SIGINT, &act, &old_int_);
}

ExitSignals::~ExitSignals() {
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGINT, &old_int_, nullptr);
  g_installed = false;
}

int ExitSignals::received() { return g_received.load(); }

const char* signal_name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    default: return "a signal";
  }
}

}  // namespace tessera

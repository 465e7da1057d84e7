#include "tessera/train/exit_signals.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "tessera/core/error.h"

namespace tessera {

namespace {

// Written by the handler, read by the training loop. A lock-free atomic is
// async-signal-safe; in tessera the handler runs on the router's thread
// (route_exit_signals_to_own_thread), elsewhere (a test, a library user) on
// any thread of the process, which is why it does nothing else.
std::atomic<int> g_received{0};
std::atomic<bool> g_installed{false};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_exit_signal(int signal) {
  int none = 0;
  g_received.compare_exchange_strong(none, signal);  // keep the first
}

// (2,) SIGTERM and SIGINT: what ExitSignals catches and the router routes.
sigset_t exit_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void route_exit_signals_to_own_thread() {
  static std::atomic<bool> routed{false};
  TESSERA_CHECK(!routed.exchange(true), "route_exit_signals_to_own_thread: call it once");
  const sigset_t set = exit_signal_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // inherited by every thread created from here on
  std::thread([set] {
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    while (true) pause();  // returns after each handled signal; the process's exit ends it
  }).detach();
}

void unblock_exit_signals() {
  const sigset_t set = exit_signal_set();
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
}

ExitSignals::ExitSignals() {
  TESSERA_CHECK(!g_installed.exchange(true), "ExitSignals: one at a time per process");
  g_received = 0;
  struct sigaction act {};
  act.sa_handler = on_exit_signal;
  sigemptyset(&act.sa_mask);
  // SA_RESTART: a system call the signal interrupts (a read, MPI's polling)
  // resumes instead of failing with EINTR in code that does not expect it.
  act.sa_flags = SA_RESTART | SA_RESETHAND;
  sigaction(SIGTERM, &act, &old_term_);  // the two of exit_signal_set()
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

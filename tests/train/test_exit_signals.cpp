// Where SIGTERM and SIGINT are handled (train/exit_signals.h): after
// route_exit_signals_to_own_thread, never on a thread that computes. The JIT
// sgemm kernels of Debian's oneDNN point rsp into the heap while they run,
// and a signal handled there pushes its frame onto the heap: the SIGTERM
// test of tests/scripts/test_mpi_faults.sh aborted in free() about one run
// in 40 before the routing. The routing is process-wide and for good, so
// each case runs in a child process.
#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <functional>
#include <thread>
#include <vector>

#include "tessera/kernels/cpu/matmul.h"
#include "tessera/train/exit_signals.h"

namespace tessera {
namespace {

pid_t this_thread_id() { return pid_t(syscall(SYS_gettid)); }

// The LM head's GEMMs of the SIGTERM test's model (where its abort struck):
// N 32 tokens, C 32 wide, OC 4096 vocabulary; forward and backward.
struct HeadGemms {
  static constexpr int64_t N = 32, C = 32, OC = 4096;
  std::vector<float> inp = std::vector<float>(N * C, 0.5f);        // (N, C)
  std::vector<float> weight = std::vector<float>(OC * C, 0.01f);   // (OC, C)
  std::vector<float> out = std::vector<float>(N * OC);             // (N, OC)
  std::vector<float> dinp = std::vector<float>(N * C);             // (N, C)
  std::vector<float> dweight = std::vector<float>(OC * C);         // (OC, C)
  void run() {
    cpu::matmul_forward(out.data(), inp.data(), weight.data(), nullptr, N, C, OC);
    cpu::matmul_backward(dinp.data(), dweight.data(), nullptr, out.data(), inp.data(),
                         weight.data(), N, C, OC, false, false);
  }
};

// Runs `body` in a forked child: its wait status.
int wait_status_of_child(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// Spins until `done` or 10 s have passed (a lost signal fails, never hangs).
bool within_10s(const std::function<bool()>& done, const std::function<void()>& meanwhile) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    meanwhile();
  }
  return true;
}

std::atomic<int> g_handled{0};
std::atomic<pid_t> g_handler_thread{0};  // the thread the last handler ran on
extern "C" void record_thread(int) {
  g_handler_thread = this_thread_id();
  g_handled.fetch_add(1);
}

constexpr int kSignals = 40;

// The main thread and a worker compute the head's GEMMs while the process
// receives kSignals SIGTERMs and SIGINTs; exit status: how many handlers ran
// on one of the two (100: a signal was never handled).
int handlers_on_computing_threads() {
  route_exit_signals_to_own_thread();
  struct sigaction act {};
  act.sa_handler = record_thread;
  sigemptyset(&act.sa_mask);
  act.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &act, nullptr);
  sigaction(SIGINT, &act, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<pid_t> worker_thread{0};
  std::thread worker([&] {
    worker_thread = this_thread_id();
    HeadGemms g;
    while (!stop) g.run();
  });
  HeadGemms g;
  const pid_t main_thread = this_thread_id();
  int on_computing = 0;
  bool lost = !within_10s([&] { return worker_thread != 0; }, [] {});
  for (int i = 1; i <= kSignals && !lost; ++i) {
    kill(getpid(), i % 2 ? SIGTERM : SIGINT);  // process-directed, as a launcher's
    lost = !within_10s([&] { return g_handled >= i; }, [&] { g.run(); });
    const pid_t t = g_handler_thread;
    if (t == main_thread || t == worker_thread) ++on_computing;
  }
  stop = true;
  worker.join();
  return lost ? 100 : on_computing;
}

TEST(ExitSignals, HandlersNeverRunOnAComputingThread) {
  const int status = wait_status_of_child(handlers_on_computing_threads);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died: wait status " << status;
  ASSERT_NE(WEXITSTATUS(status), 100) << "a signal was never handled";
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << WEXITSTATUS(status) << " of " << kSignals
      << " handlers ran on a thread computing GEMMs, not on the router's thread";
}

TEST(ExitSignals, ExitSignalsCatchesWhatTheRouterReceives) {
  const int status = wait_status_of_child([] {
    route_exit_signals_to_own_thread();
    ExitSignals signals;
    kill(getpid(), SIGINT);
    HeadGemms g;
    return within_10s([] { return ExitSignals::received() == SIGINT; }, [&] { g.run(); }) ? 0 : 1;
  });
  ASSERT_TRUE(WIFEXITED(status)) << "the child died: wait status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "ExitSignals::received() never saw the SIGINT";
}

TEST(ExitSignals, WithoutAHandlerASignalStillEndsTheProcess) {
  // No --exit-signal-handler: the router's thread takes the signal and its
  // default action ends the whole process, as it did before the routing.
  const int status = wait_status_of_child([] {
    route_exit_signals_to_own_thread();
    kill(getpid(), SIGTERM);
    HeadGemms g;
    within_10s([] { return false; }, [&] { g.run(); });
    return 0;  // survived 10 s: the signal was lost
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "the process survived SIGTERM: wait status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

}  // namespace
}  // namespace tessera

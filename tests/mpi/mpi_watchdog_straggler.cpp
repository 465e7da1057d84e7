// A job that hangs on purpose, for the watchdog tests (tests/CMakeLists.txt).
//   skip:     the last rank skips the 4th all_reduce and sleeps; the others
//             wait in it. Their watchdogs must name the last rank as behind.
//   mismatch: the last rank calls a barrier where the others all_reduce; both
//             sides hang, and the watchdogs must call it a mismatch.
// Either way the job must end with MPI_Abort within seconds (the timeout is
// 1 s), never reach the end of main, and exit non-zero.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tessera/comm/mpi_runtime.h"

int main(int argc, char** argv) {
  using namespace tessera::comm;
  MpiRuntime runtime(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "skip";
  auto world = runtime.world();
  runtime.set_comm_timeout(1.0);
  const bool straggler = world->rank() == world->size() - 1;

  std::vector<float> values(12, 1.0f);
  for (int step = 0; step < 3; ++step) world->all_reduce(values);
  if (!straggler) {
    world->all_reduce(values);
  } else if (mode == "skip") {
    std::this_thread::sleep_for(std::chrono::seconds(60));
  } else {
    world->barrier();
  }
  world->barrier();
  std::fprintf(stderr, "rank %d: reached the end, the watchdog did not fire\n", world->rank());
  return 0;
}

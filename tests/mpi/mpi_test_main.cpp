// main() for the multi-rank gtest binaries (run under scripts/mpirun.sh).
//
// Every rank runs every test. Rank 0 prints gtest's normal output; the
// others print only their failures, prefixed with their rank. The exit
// status is the worst over all ranks, so a failure on any rank fails the
// process (and the CTest test). A watchdog with a generous timeout turns a
// test that deadlocks into a report and an abort instead of a CTest timeout.
#include <gtest/gtest.h>
#include <mpi.h>
#include <omp.h>

#include <cstdio>
#include <map>
#include <memory>
#include <utility>

#include "mpi_test_env.h"
#include "tessera/comm/node_local.h"

namespace tessera::test {
namespace {

comm::MpiRuntime* g_runtime = nullptr;  // test harness only: owned by main()
comm::Communicator* g_world = nullptr;

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.summary());
  }

 private:
  int rank_;
};

}  // namespace

comm::MpiRuntime& mpi_runtime() { return *g_runtime; }
comm::Communicator& world() { return *g_world; }

comm::Grid& grid_of(int tp, int pp) {
  static std::map<std::pair<int, int>, std::unique_ptr<comm::Grid>> grids;
  auto& g = grids[{tp, pp}];
  if (!g) {
    ParallelConfig par{.tp = tp, .pp = pp};
    par.set_world(world().size());
    g = std::make_unique<comm::Grid>(world(), par);
  }
  return *g;
}

}  // namespace tessera::test

int main(int argc, char** argv) {
  using namespace tessera;
  comm::MpiRuntime runtime(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  auto world = runtime.world();
  test::g_runtime = &runtime;
  test::g_world = world.get();
  runtime.set_comm_timeout(30);
  // Ranks share the cores: one OpenMP team per core, not per rank.
  omp_set_num_threads(comm::default_threads_per_rank());

  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (runtime.world_rank() != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new test::RankFailurePrinter(runtime.world_rank()));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (runtime.world_rank() == 0 && any_failed)
    std::fprintf(stderr, "mpi test: a test failed on at least one rank\n");
  // Cases skip at rank counts they do not need; a run where all of them did
  // tested nothing, and CTest must say so (tests/CMakeLists.txt matches this).
  const auto& unit = *::testing::UnitTest::GetInstance();
  int all_skipped =
      unit.test_to_run_count() > 0 && unit.skipped_test_count() == unit.test_to_run_count();
  int everywhere = 0;
  MPI_Allreduce(&all_skipped, &everywhere, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (runtime.world_rank() == 0 && everywhere && !any_failed)
    std::printf("mpi test: every case skipped at %d rank(s)\n", runtime.world_size());
  runtime.set_comm_timeout(0);
  world.reset();
  return any_failed;
}

// The launcher's word on a rank before MPI starts (comm/launch_env.h): what
// decides which process takes --save's lock before MPI start-up.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tessera/comm/launch_env.h"

namespace tessera::comm {
namespace {

struct CleanEnv {
  CleanEnv() {
    for (const char* v : kVars) ::unsetenv(v);
  }
  ~CleanEnv() {
    for (const char* v : kVars) ::unsetenv(v);
  }
  static constexpr const char* kVars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
};

TEST(LaunchEnv, NoLauncherVariableMeansUnnamedRankZero) {
  CleanEnv env;
  const LaunchRank r = launch_rank();
  EXPECT_EQ(r.rank, 0);
  EXPECT_FALSE(r.named);
}

TEST(LaunchEnv, EachLaunchersVariableNamesTheRankOpenMpisFirst) {
  CleanEnv env;
  ::setenv("PMI_RANK", "3", 1);
  EXPECT_EQ(launch_rank().rank, 3);
  EXPECT_TRUE(launch_rank().named);
  ::setenv("PMIX_RANK", "2", 1);
  EXPECT_EQ(launch_rank().rank, 2);
  ::setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  EXPECT_EQ(launch_rank().rank, 0);
  EXPECT_TRUE(launch_rank().named);
}

// A value that is not a rank is no word at all: the next variable, or none.
TEST(LaunchEnv, AValueThatIsNotARankIsSkipped) {
  CleanEnv env;
  for (const char* bad : {"", "-1", "1x", "99999999999", "x"}) {
    ::setenv("OMPI_COMM_WORLD_RANK", bad, 1);
    EXPECT_FALSE(launch_rank().named) << '"' << bad << '"';
    ::setenv("PMI_RANK", "5", 1);
    EXPECT_EQ(launch_rank().rank, 5) << '"' << bad << '"';
    ::unsetenv("PMI_RANK");
  }
}

}  // namespace
}  // namespace tessera::comm

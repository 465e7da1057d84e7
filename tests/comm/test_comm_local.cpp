// LocalCommunicator: the one-process backend that needs no MPI.
#include <gtest/gtest.h>

#include <vector>

#include "tessera/comm/grid.h"
#include "tessera/comm/local_communicator.h"
#include "tessera/core/error.h"

namespace tessera::comm {
namespace {

TEST(LocalCommunicator, CollectivesOverOneRankAreIdentities) {
  LocalCommunicator world;
  std::vector<float> v{1, 2, 3};
  world.all_reduce(v);
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3}));
  std::vector<float> shard(3);
  world.reduce_scatter(v, shard);
  EXPECT_EQ(shard, v);
  std::vector<float> full(3);
  world.all_gather_async(shard, full).wait();
  EXPECT_EQ(full, v);
  EXPECT_EQ(world.all_reduce_scalar(2.5f, ReduceOp::Max), 2.5f);
  EXPECT_EQ(world.log().counters()[CommOp::AllReduce].calls, 2u);
  // all_to_all over one rank: its one block goes to itself.
  const std::vector<size_t> counts = world.exchange_counts(std::vector<size_t>{3});
  ASSERT_EQ(counts, std::vector<size_t>{3});
  std::vector<float> back(3);
  world.all_to_all(v.data(), counts, back.data(), counts, Precision::Fp32);
  EXPECT_EQ(back, v);
  EXPECT_EQ(world.log().counters()[CommOp::AllToAll].calls, 2u);  // the counts, then the data
  EXPECT_EQ(world.log().counters()[CommOp::AllToAll].wire_bytes, 0.0);  // nothing travels
}

TEST(LocalCommunicator, SendToSelfThenReceive) {
  LocalCommunicator world;
  std::vector<float> out{4, 5}, in(2);
  world.send(out, 0, 9);
  world.recv(in, 0, 9);
  EXPECT_EQ(in, out);
  EXPECT_THROW(world.recv(in, 0, 9), Error);  // nothing left: would hang
  EXPECT_THROW(world.send(out, 1, 0), Error);
}

TEST(LocalCommunicator, GridOfOne) {
  LocalCommunicator world;
  Grid grid(world, ParallelConfig{});
  EXPECT_EQ(grid.tp().size(), 1);
  EXPECT_EQ(grid.dp().size(), 1);
  ASSERT_NE(grid.embedding(), nullptr);
  EXPECT_TRUE(grid.is_first_stage() && grid.is_last_stage());
  EXPECT_THROW(Grid(world, ParallelConfig{.tp = 2}), Error);
}

}  // namespace
}  // namespace tessera::comm

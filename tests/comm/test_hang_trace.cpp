// trace_hang on a fake progress board: which rank a hang starts at, and why
// (tests/mpi/watchdog_sigstop.sh checks the same on a real job).
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tessera/comm/hang_trace.h"

namespace tessera::comm {
namespace {

constexpr int kTp = 1, kPp = 2, kDp = 3;  // group ids

// Boards of a few ranks. A rank in `running` beats while time passes.
struct FakeBoard final : BoardReader {
  std::map<std::pair<int, int>, GroupProgress> groups;  // (rank, group id)
  std::map<int, RankStatus> statuses;
  std::set<int> running, silent;

  void join(int rank, int group_id, const std::string& name, std::vector<int> members,
            uint64_t entered, uint64_t completed) {
    GroupProgress& p = groups[{rank, group_id}];
    p.name = name;
    p.members = std::move(members);
    p.entered = entered;
    p.completed = completed;
  }
  void wait_in(int rank, WaitingCall call) {
    statuses[rank].heartbeat = 1;
    statuses[rank].waiting.push_back(call);
  }
  std::optional<GroupProgress> group(int rank, int group_id) const override {
    if (silent.count(rank)) return std::nullopt;
    auto it = groups.find({rank, group_id});
    if (it == groups.end()) return std::nullopt;
    return it->second;
  }
  std::optional<RankStatus> status(int rank) const override {
    if (silent.count(rank)) return std::nullopt;
    auto it = statuses.find(rank);
    return it == statuses.end() ? RankStatus{1, {}} : it->second;
  }
  HangTrace trace(int me, WaitingCall stuck, std::vector<WaitingCall> more = {}) {
    more.insert(more.begin(), stuck);
    return trace_hang(me, more, *this, [this] {
      for (int r : running) statuses[r].heartbeat += 8;
    });
  }
};

TEST(HangTrace, AStoppedRankInsideTheCollectiveIsWhereItStarts) {
  // dp 2: rank 1 posted its async all-reduce #5, then stopped inside it.
  FakeBoard b;
  b.join(0, kDp, "dp", {0, 1}, 6, 5);
  b.join(1, kDp, "dp", {0, 1}, 6, 5);
  b.wait_in(1, {kDp, 5, CommOp::AllReduce});
  const HangTrace t = b.trace(0, {kDp, 5, CommOp::AllReduce});
  ASSERT_EQ(t.roots.size(), 1u);
  EXPECT_EQ(t.roots[0].rank, 1);
  EXPECT_EQ(t.roots[0].kind, RootKind::Stopped);
  EXPECT_EQ(t.roots[0].path, "world rank 0 --all_reduce #5 on 'dp'--> world rank 1");
  EXPECT_TRUE(t.is_stopped(1));

  // The same board with rank 1 running: it waits too, and names nobody.
  b.running.insert(1);
  const HangTrace alive = b.trace(0, {kDp, 5, CommOp::AllReduce});
  EXPECT_TRUE(alive.roots.empty());
  EXPECT_FALSE(alive.is_stopped(1));
}

TEST(HangTrace, FollowsTheWaitsIntoAGroupThisRankIsNotIn) {
  // tp 2 x pp 2, rank 3 stopped: rank 0 waits for a send from rank 2 (pp),
  // rank 2 waits in a tp all-reduce with rank 3.
  FakeBoard b;
  b.running = {1, 2};
  b.join(0, kPp, "pp", {0, 2}, 4, 4);
  b.join(2, kTp, "tp", {2, 3}, 10, 9);
  b.join(3, kTp, "tp", {2, 3}, 9, 9);  // never entered #9: behind, and stopped
  b.wait_in(2, {kTp, 9, CommOp::AllReduce});
  b.wait_in(3, {kPp, 7, CommOp::Recv, 1});
  const HangTrace t = b.trace(0, {kPp, 2, CommOp::Recv, 2});
  ASSERT_EQ(t.roots.size(), 1u);
  EXPECT_EQ(t.roots[0].rank, 3);
  EXPECT_EQ(t.roots[0].kind, RootKind::Stopped);
  EXPECT_EQ(t.roots[0].path,
            "world rank 0 --recv from world rank 2 on 'pp'--> world rank 2 --all_reduce #9 on "
            "'tp'--> world rank 3");
}

TEST(HangTrace, FollowsEveryCallThisRankWaitsIn) {
  // tp 2 x pp 2, rank 0 stopped: rank 1's oldest call is an async recv from
  // rank 3, which waits for rank 1's send; rank 1 never sends, because it is
  // in a tp all-reduce with rank 0 since.
  FakeBoard b;
  b.running = {1, 3};
  b.join(1, kTp, "tp", {0, 1}, 9, 8);
  b.join(0, kTp, "tp", {0, 1}, 8, 8);
  b.wait_in(3, {kPp, 4, CommOp::Recv, 1});
  const WaitingCall recv{kPp, 4, CommOp::Recv, 3}, all_reduce{kTp, 8, CommOp::AllReduce};
  EXPECT_TRUE(b.trace(1, recv).roots.empty());  // rank 3 waits on rank 1: a cycle
  const HangTrace t = b.trace(1, recv, {all_reduce});
  ASSERT_EQ(t.roots.size(), 1u);
  EXPECT_EQ(t.roots[0].rank, 0);
  EXPECT_EQ(t.roots[0].kind, RootKind::Stopped);
  EXPECT_EQ(t.roots[0].path, "world rank 1 --all_reduce #8 on 'tp'--> world rank 0");
}

TEST(HangTrace, ARunningRankInNoCallIsBusy) {
  // The rank that never came (a stuck kernel): alive, waiting in nothing.
  FakeBoard b;
  b.running = {1};
  b.join(0, kTp, "world", {0, 1}, 4, 3);
  b.join(1, kTp, "world", {0, 1}, 3, 3);
  const HangTrace t = b.trace(0, {kTp, 3, CommOp::AllReduce});
  ASSERT_EQ(t.roots.size(), 1u);
  EXPECT_EQ(t.roots[0].rank, 1);
  EXPECT_EQ(t.roots[0].kind, RootKind::Busy);
}

TEST(HangTrace, AMismatchDeadlockHasNoRootAndASilentBoardIsOne) {
  FakeBoard b;
  b.running = {1};
  b.join(0, kTp, "world", {0, 1}, 4, 3);
  b.join(1, kTp, "world", {0, 1}, 4, 3);  // in a barrier where rank 0 all-reduces
  b.wait_in(1, {kTp, 3, CommOp::Barrier});
  EXPECT_TRUE(b.trace(0, {kTp, 3, CommOp::AllReduce}).roots.empty());

  b.silent.insert(1);
  const HangTrace t = b.trace(0, {kTp, 3, CommOp::AllReduce});
  ASSERT_EQ(t.roots.size(), 1u);
  EXPECT_EQ(t.roots[0].kind, RootKind::Silent);
}

}  // namespace
}  // namespace tessera::comm

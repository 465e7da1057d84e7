// CollectiveLog (ring buffer, in-flight detection, counters), bandwidth
// conventions and shard arithmetic.
#include <gtest/gtest.h>

#include "tessera/comm/collective_log.h"
#include "tessera/comm/comm_op.h"
#include "tessera/comm/shard.h"

namespace tessera::comm {
namespace {

CollectiveRecord call(CommOp op, size_t bytes, double issued, int group_size = 4) {
  CollectiveRecord r;
  r.op = op;
  r.bytes = bytes;
  r.issued = issued;
  r.group = "dp";
  r.group_size = group_size;
  return r;
}

TEST(CollectiveLog, KeepsTheNewestRecordsInOrder) {
  CollectiveLog log(4);
  for (int i = 0; i < 10; ++i) log.finish(log.begin(call(CommOp::AllReduce, size_t(i), 1.0)), 2.0);
  EXPECT_EQ(log.recorded(), 10u);
  const auto last = log.last(100);
  ASSERT_EQ(last.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(last[i].id, 6 + i);
  EXPECT_EQ(log.last(2).back().bytes, 9u);
}

TEST(CollectiveLog, OverdueSeesOnlyStartedUnfinishedOldCalls) {
  CollectiveLog log(8);
  const uint64_t done = log.begin(call(CommOp::AllReduce, 4, 10.0));
  log.mark_started(done, 10.0);
  log.finish(done, 11.0);
  const uint64_t stuck = log.begin(call(CommOp::Barrier, 0, 10.0));
  log.mark_started(stuck, 10.5);
  log.begin(call(CommOp::AllGather, 8, 10.0));  // queued, never started
  const uint64_t recent = log.begin(call(CommOp::Broadcast, 8, 19.0));
  log.mark_started(recent, 19.5);
  const auto overdue = log.overdue(20.0, 5.0);
  ASSERT_EQ(overdue.size(), 1u);
  EXPECT_EQ(overdue[0].id, stuck);
  EXPECT_NE(format_records(log.last(8), 20.0).find("IN FLIGHT"), std::string::npos);
}

TEST(CollectiveLog, CountsBytesWithBusBandwidthConventions) {
  CollectiveLog log;
  log.finish(log.begin(call(CommOp::AllReduce, 1000, 1.0)), 2.0);
  log.finish(log.begin(call(CommOp::ReduceScatter, 1000, 1.0)), 1.5);
  log.finish(log.begin(call(CommOp::AllGather, 1000, 1.0)), 1.5);
  const auto c = log.counters();
  EXPECT_DOUBLE_EQ(c[CommOp::AllReduce].wire_bytes, 1500.0);   // 2 (n-1)/n, n = 4
  EXPECT_DOUBLE_EQ(c[CommOp::ReduceScatter].wire_bytes, 750.0);  // (n-1)/n
  EXPECT_DOUBLE_EQ(c[CommOp::AllReduce].seconds, 1.0);
  EXPECT_EQ(c.total_bytes(), 3000u);
  EXPECT_EQ(c.by_group.at("dp")[size_t(CommOp::AllGather)].calls, 1u);
  log.reset_counters();
  EXPECT_EQ(log.counters().total_bytes(), 0u);
}

TEST(BusFactor, MatchesNcclTests) {
  EXPECT_DOUBLE_EQ(bus_factor(CommOp::AllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(CommOp::AllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_factor(CommOp::AllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor(CommOp::Broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(CommOp::AllReduce, 1), 0.0);
}

TEST(Shard, PadsInsteadOfTruncating) {
  // 10 elements over 4 ranks: blocks of 3, 12 padded; the last rank holds 1 real.
  EXPECT_EQ(shard_of(10, 4, 0).shard_count, 3u);
  EXPECT_EQ(shard_of(10, 4, 0).padded_count, 12u);
  EXPECT_EQ(shard_of(10, 4, 3).begin, 9u);
  EXPECT_EQ(shard_of(10, 4, 3).valid, 1u);
  EXPECT_EQ(shard_of(2, 4, 3).valid, 0u);
  EXPECT_EQ(shard_of(12, 4, 3).valid, 3u);
}

}  // namespace
}  // namespace tessera::comm

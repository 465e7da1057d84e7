// The Communicator in front of a backend: what a backend gets for free
// (argument checks, logging, byte counts, blocking = async + wait), shown
// with a backend that only records what it was asked to do.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tessera/comm/comm_monitor.h"
#include "tessera/comm/communicator.h"
#include "tessera/core/error.h"

namespace tessera::comm {
namespace {

// Two ranks on paper (this is rank 1 of world ranks {5, 7}); every call
// completes at once and is written down as "op:blocking".
class RecordingBackend final : public CommBackend {
 public:
  explicit RecordingBackend(std::vector<std::string>* calls) : calls_(calls) {}
  int rank() const override { return 1; }
  int size() const override { return 2; }
  int world_rank_of(int group_rank) const override { return group_rank == 0 ? 5 : 7; }
  size_t max_count() const override { return 1000; }
  std::unique_ptr<CommBackend> split(int color, int) override {
    return color < 0 ? nullptr : std::make_unique<RecordingBackend>(calls_);
  }
  Work iall_reduce(void*, size_t, Precision, ReduceOp, const CommCall& c) override {
    return note("all_reduce", c);
  }
  Work ireduce_scatter(const void*, void*, size_t, Precision, ReduceOp, const CommCall& c) override {
    return note("reduce_scatter", c);
  }
  Work iall_gather(const void*, void*, size_t, Precision, const CommCall& c) override {
    return note("all_gather", c);
  }
  Work ibroadcast(void*, size_t, Precision, int, const CommCall& c) override {
    return note("broadcast", c);
  }
  Work isend(const void*, size_t, Precision, int, int, const CommCall& c) override {
    return note("send", c);
  }
  Work irecv(void*, size_t, Precision, int, int, const CommCall& c) override {
    return note("recv", c);
  }
  Work ibarrier(const CommCall& c) override { return note("barrier", c); }
  Work iall_to_all(const void*, const size_t*, void*, const size_t*, Precision,
                   const CommCall& c) override {
    return note("all_to_all", c);
  }

 private:
  Work note(const std::string& op, const CommCall& call) {
    calls_->push_back(op + (call.blocking() ? ":blocking" : ":async"));
    call.started();
    call.finished();
    return {};
  }
  std::vector<std::string>* calls_;
};

struct Fixture {
  std::vector<std::string> calls;
  std::shared_ptr<CommMonitor> monitor = std::make_shared<CommMonitor>(7, 64, nullptr);
  Communicator comm{std::make_unique<RecordingBackend>(&calls), "dp", monitor};
};

TEST(CommBackend, BlockingFormsAreTheAsyncPrimitivesWaitedFor) {
  Fixture f;
  f.calls.clear();  // the group-id agreement at construction
  std::vector<float> v(4), shard(2);
  f.comm.all_reduce(v);
  f.comm.all_reduce_async(v).wait();
  f.comm.reduce_scatter(v, shard);
  f.comm.all_gather_async(shard, v).wait();
  f.comm.broadcast(v, 0);
  f.comm.send(v, 0, 3);
  f.comm.recv_async(v.data(), v.size(), Precision::Fp32, 0, 3).wait();
  f.comm.barrier();
  const std::vector<size_t> counts{2, 2};
  std::vector<float> out(4);
  f.comm.all_to_all(v.data(), counts, out.data(), counts, Precision::Fp32);
  f.comm.all_to_all_async(v.data(), counts, out.data(), counts, Precision::Bf16).wait();
  EXPECT_EQ(f.calls, (std::vector<std::string>{"all_reduce:blocking", "all_reduce:async",
                                               "reduce_scatter:blocking", "all_gather:async",
                                               "broadcast:blocking", "send:blocking",
                                               "recv:async", "barrier:blocking",
                                               "all_to_all:blocking", "all_to_all:async"}));
}

TEST(CommBackend, AllToAllChecksItsCountsAgainstTheLimitAndItsOwnBlock) {
  Fixture f;
  std::vector<float> send(1200), recv(1200);
  // The totals bound every block and offset: 600 + 500 > the backend's 1000.
  const std::vector<size_t> big{600, 500}, own{600, 300};
  EXPECT_THROW(f.comm.all_to_all(send.data(), big, recv.data(), own, Precision::Fp32), Error);
  // This is rank 1: it sends itself 500 and must expect 500.
  const std::vector<size_t> two{1, 2}, three{1, 3};
  EXPECT_THROW(f.comm.all_to_all(send.data(), two, recv.data(), three, Precision::Fp32), Error);
  EXPECT_THROW(f.comm.all_to_all(send.data(), two, recv.data(), std::vector<size_t>{2},
                                 Precision::Fp32),
               Error);
  f.calls.clear();
  f.comm.all_to_all(send.data(), two, recv.data(), two, Precision::Fp32);
  EXPECT_EQ(f.calls, std::vector<std::string>{"all_to_all:blocking"});
}

TEST(CommBackend, EveryCallIsLoggedWithGroupRanksAndBytes) {
  Fixture f;
  std::vector<float> v(4), shard(2);
  f.comm.reduce_scatter(v, shard);
  f.comm.send(v, 0, 3);
  f.comm.broadcast_async(v.data(), v.size(), Precision::Fp32, 1).wait();
  const auto last = f.comm.log().last(3);
  ASSERT_EQ(last.size(), 3u);
  EXPECT_EQ(last[0].op, CommOp::ReduceScatter);
  EXPECT_EQ(last[0].bytes, 16u);  // the full input: 2 ranks x 2 floats
  EXPECT_EQ(last[0].group, "dp");
  EXPECT_EQ(last[0].group_rank, 1);
  EXPECT_EQ(last[0].group_size, 2);
  EXPECT_EQ(last[1].peer, 5);  // world rank of group rank 0
  EXPECT_EQ(last[1].seq, 0u);  // sends count apart from collectives
  EXPECT_EQ(last[2].seq, 1u);  // the second collective of the group
  EXPECT_TRUE(last[2].async);
  for (const auto& r : last) EXPECT_GT(r.end, 0.0);
  EXPECT_EQ(f.comm.log().counters()[CommOp::ReduceScatter].bytes, 16u);
}

TEST(CommBackend, BadArgumentsThrowBeforeTheCallIsLoggedOrIssued) {
  Fixture f;
  f.calls.clear();
  const uint64_t before = f.comm.log().recorded();
  std::vector<uint16_t> half(4);
  std::vector<float> v(4);
  EXPECT_THROW(f.comm.all_reduce(half.data(), 4, Precision::Fp16, ReduceOp::Sum), Error);  // no fp16 sums
  EXPECT_THROW(f.comm.all_reduce_async(half.data(), 4, Precision::Fp16, ReduceOp::Sum), Error);
  EXPECT_THROW(f.comm.all_gather(v.data(), v.data(), 1001, Precision::Fp32), Error);  // > max_count
  EXPECT_THROW(f.comm.send(v, 2, 0), Error);       // no rank 2 in a group of 2
  EXPECT_THROW(f.comm.broadcast(v, -1), Error);
  EXPECT_EQ(f.comm.log().recorded(), before);
  EXPECT_TRUE(f.calls.empty());
}

TEST(CommBackend, SplitSharesTheLogAndRegistersTheGroup) {
  Fixture f;
  auto part = f.comm.split(0, 0, "tp");
  ASSERT_NE(part, nullptr);
  EXPECT_NE(part->group_id(), f.comm.group_id());
  EXPECT_EQ(&part->log(), &f.comm.log());
  ASSERT_TRUE(f.monitor->group(part->group_id()).has_value());
  EXPECT_EQ(f.monitor->group(part->group_id())->world_ranks, (std::vector<int>{5, 7}));
  EXPECT_EQ(f.comm.split(-1, 0, "none"), nullptr);
}

}  // namespace
}  // namespace tessera::comm

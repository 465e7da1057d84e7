// Every collective of the MPI backend against a hand-computed expectation,
// blocking and non-blocking, for sizes that do and do not divide by the
// group size, and big enough to cross the ring's 256 KiB pieces.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "mpi_test_env.h"
#include "tessera/comm/collective_log.h"
#include "tessera/comm/ring_reduce_scatter.h"
#include "tessera/comm/shard.h"
#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/core/rng.h"

namespace tessera::comm {
namespace {

using test::world;

// Rank r's contribution at index i: small integers and halves, so sums over
// 4 ranks are exact in fp32 and every rank/index pair is distinguishable.
float contribution(int rank, size_t i) { return float(rank + 1) + 0.5f * float(i % 7); }

float expected_sum(int size, size_t i) {
  float s = 0;
  for (int r = 0; r < size; ++r) s += contribution(r, i);
  return s;
}

std::vector<float> contributions(int rank, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = contribution(rank, i);
  return v;
}

// Counts around the ring's piece size (64 Ki elements) and odd ones.
const std::vector<size_t> kCounts = {1, 7, 1000, 65536 * 2 + 3, 300001};

TEST(Collectives, AllReduceSum) {
  Communicator& w = world();
  for (size_t count : kCounts) {
    auto v = contributions(w.rank(), count);
    w.all_reduce(v);
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(v[i], expected_sum(w.size(), i)) << count << " " << i;
  }
}

TEST(Collectives, AllReduceMaxAndScalar) {
  Communicator& w = world();
  auto v = contributions(w.rank(), 33);
  w.all_reduce(v, ReduceOp::Max);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], contribution(w.size() - 1, i));
  EXPECT_EQ(w.all_reduce_scalar(float(w.rank()), ReduceOp::Max), float(w.size() - 1));
  EXPECT_EQ(w.all_reduce_scalar(1.0f), float(w.size()));
}

// The squared gradient norm is reduced in double (issue 15, defect 10): a
// sum past float's range stays finite, as it does on one rank.
TEST(Collectives, DoubleScalarSumsPastFloatRange) {
  Communicator& w = world();
  const double huge = 1e300;  // > FLT_MAX; a float cast would make it inf
  EXPECT_EQ(w.all_reduce_scalar(huge), huge * double(w.size()));
  EXPECT_THROW(w.reduce_scatter(nullptr, nullptr, 1, Precision::Fp64, ReduceOp::Sum), Error);
}

// The ZeRO case: a buffer of `total` elements, padded to a multiple of the
// group size with zeros; each rank gets its shard of the sum.
void check_reduce_scatter(size_t total, bool in_place, ReduceOp op) {
  Communicator& w = world();
  const Shard shard = shard_of(total, w.size(), w.rank());
  std::vector<float> input(shard.padded_count, 0.0f);  // (size * shard) padding stays 0
  for (size_t i = 0; i < total; ++i) input[i] = contribution(w.rank(), i);
  std::vector<float> separate(shard.shard_count, -1.0f);
  std::span<float> out = in_place ? std::span<float>(input).subspan(shard.begin, shard.shard_count)
                                  : std::span<float>(separate);
  w.reduce_scatter(input, out, op);
  for (size_t j = 0; j < shard.shard_count; ++j) {
    const size_t i = shard.begin + j;
    const float want = j >= shard.valid           ? 0.0f
                       : op == ReduceOp::Sum      ? expected_sum(w.size(), i)
                                                  : contribution(w.size() - 1, i);
    ASSERT_EQ(out[j], want) << "total " << total << " element " << i << " in_place " << in_place;
  }
}

TEST(Collectives, ReduceScatterSumPadded) {
  for (size_t total : {size_t(4), size_t(10), size_t(13), size_t(1000), size_t(300001)})
    check_reduce_scatter(total, false, ReduceOp::Sum);
}

TEST(Collectives, ReduceScatterInPlace) {
  for (size_t total : {size_t(10), size_t(300001)}) check_reduce_scatter(total, true, ReduceOp::Sum);
}

TEST(Collectives, ReduceScatterMax) { check_reduce_scatter(1001, false, ReduceOp::Max); }

TEST(Collectives, AllGatherPaddedAndInPlace) {
  Communicator& w = world();
  for (size_t total : {size_t(5), size_t(1000), size_t(300001)}) {
    const Shard shard = shard_of(total, w.size(), w.rank());
    std::vector<float> mine(shard.shard_count, 0.0f);
    for (size_t j = 0; j < shard.valid; ++j) mine[j] = contribution(0, shard.begin + j);
    std::vector<float> full(shard.padded_count, -1.0f);
    w.all_gather(mine, full);
    std::vector<float> in_place(shard.padded_count, -1.0f);
    std::copy(mine.begin(), mine.end(), in_place.begin() + ptrdiff_t(shard.begin));
    w.all_gather(std::span<const float>(in_place).subspan(shard.begin, shard.shard_count), in_place);
    for (size_t i = 0; i < shard.padded_count; ++i) {
      const float want = i < total ? contribution(0, i) : 0.0f;
      ASSERT_EQ(full[i], want) << total << " " << i;
      ASSERT_EQ(in_place[i], want) << total << " " << i;
    }
  }
}

TEST(Collectives, AllGatherMovesBf16Bits) {
  Communicator& w = world();
  std::vector<uint16_t> mine(3, uint16_t(0xAB00 + w.rank()));
  std::vector<uint16_t> full(3 * size_t(w.size()));
  w.all_gather(mine.data(), full.data(), 3, Precision::Bf16);
  for (size_t i = 0; i < full.size(); ++i) EXPECT_EQ(full[i], uint16_t(0xAB00 + i / 3));
}

TEST(Collectives, BroadcastFromEveryRoot) {
  Communicator& w = world();
  for (int root = 0; root < w.size(); ++root) {
    auto v = contributions(w.rank(), 1001);
    w.broadcast(v, root);
    for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], contribution(root, i));
  }
}

TEST(Collectives, SendRecvAroundTheRing) {
  Communicator& w = world();
  const int right = (w.rank() + 1) % w.size(), left = (w.rank() + w.size() - 1) % w.size();
  for (size_t count : {size_t(3), size_t(1) << 20}) {  // eager and rendezvous sizes
    auto out = contributions(w.rank(), count);
    std::vector<float> in(count, -1.0f);
    Work receiving = w.recv_async(in.data(), count, Precision::Fp32, left, 7);
    Work sending = w.send_async(out.data(), count, Precision::Fp32, right, 7);
    sending.wait();
    receiving.wait();
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(in[i], contribution(left, i));
  }
  // Blocking pair-wise exchange: even ranks send first.
  if (w.size() % 2 == 0) {
    const int partner = w.rank() ^ 1;
    std::vector<float> out{float(w.rank())}, in{-1.0f};
    if (w.rank() % 2 == 0) {
      w.send(out, partner, 3);
      w.recv(in, partner, 3);
    } else {
      w.recv(in, partner, 3);
      w.send(out, partner, 3);
    }
    EXPECT_EQ(in[0], float(partner));
  }
}

TEST(Collectives, AsyncOpsOverlapAndCompleteInAnyWaitOrder) {
  Communicator& w = world();
  const size_t total = 200003;
  const Shard shard = shard_of(total, w.size(), w.rank());
  auto summed = contributions(w.rank(), 100000);
  std::vector<float> grads(shard.padded_count, 0.0f);
  for (size_t i = 0; i < total; ++i) grads[i] = contribution(w.rank(), i);
  std::vector<float> grad_shard(shard.shard_count);
  std::vector<float> gathered(shard.padded_count);
  std::vector<float> mine(shard.shard_count, float(w.rank()));

  Work a = w.all_reduce_async(summed);
  Work b = w.reduce_scatter_async(grads, grad_shard);
  Work c = w.all_gather_async(mine, gathered);
  Work d = w.barrier_async();
  w.all_reduce_scalar(1.0f);  // a blocking call while they are in flight
  d.wait();
  c.wait();
  while (!b.test()) {
  }
  a.wait();
  EXPECT_TRUE(a.done() && b.done() && c.done() && d.done());
  for (size_t i = 0; i < summed.size(); ++i) ASSERT_EQ(summed[i], expected_sum(w.size(), i));
  for (size_t j = 0; j < shard.valid; ++j)
    ASSERT_EQ(grad_shard[j], expected_sum(w.size(), shard.begin + j));
  for (size_t i = 0; i < gathered.size(); ++i)
    ASSERT_EQ(gathered[i], float(i / shard.shard_count));

  auto root_data = contributions(w.rank(), 10);
  w.broadcast_async(root_data.data(), root_data.size(), Precision::Fp32, 0).wait();
  EXPECT_EQ(root_data[3], contribution(0, 3));
}

TEST(Collectives, WorkDestructorWaits) {
  Communicator& w = world();
  auto v = contributions(w.rank(), 5000);
  { Work pending = w.all_reduce_async(v); }  // going out of scope must not abandon it
  EXPECT_EQ(v[4999], expected_sum(w.size(), 4999));
}

// all_to_all with blocks of uneven size (rank i sends rank j i + 2j + 1
// elements, value 1000 i + 10 j + k), as an expert-parallel dispatch
// sends each rank the tokens routed to its experts.
size_t a2a_count(int from, int to) { return size_t(from + 2 * to + 1); }
float a2a_value(int from, int to, size_t k) { return float(1000 * from + 10 * to) + float(k); }

TEST(Collectives, AllToAllUnevenBlocksBlockingAndAsync) {
  Communicator& w = world();
  const int n = w.size(), me = w.rank();
  std::vector<size_t> send_counts(static_cast<size_t>(n)), want_recv(static_cast<size_t>(n));
  std::vector<float> send;
  for (int j = 0; j < n; ++j) {
    send_counts[size_t(j)] = a2a_count(me, j);
    want_recv[size_t(j)] = a2a_count(j, me);
    for (size_t k = 0; k < send_counts[size_t(j)]; ++k) send.push_back(a2a_value(me, j, k));
  }
  // Each rank learns what it receives from what the others send.
  const std::vector<size_t> recv_counts = w.exchange_counts(send_counts);
  ASSERT_EQ(recv_counts, want_recv);
  const size_t total = std::accumulate(recv_counts.begin(), recv_counts.end(), size_t(0));
  auto check = [&](const std::vector<float>& recv) {
    size_t at = 0;
    for (int i = 0; i < n; ++i)
      for (size_t k = 0; k < recv_counts[size_t(i)]; ++k, ++at)
        ASSERT_EQ(recv[at], a2a_value(i, me, k)) << "from " << i << " element " << k;
  };
  std::vector<float> recv(total, -1.0f);
  w.all_to_all(send.data(), send_counts, recv.data(), recv_counts, Precision::Fp32);
  check(recv);
  std::vector<float> recv_async(total, -1.0f);
  Work pending =
      w.all_to_all_async(send.data(), send_counts, recv_async.data(), recv_counts, Precision::Fp32);
  w.all_reduce_scalar(1.0f);  // a blocking call while it is in flight
  pending.wait();
  check(recv_async);
}

TEST(Collectives, AllToAllMovesBf16BitsAndCountsItsBytes) {
  Communicator& w = world();
  const int n = w.size();
  CollectiveLog& log = w.log();
  log.reset_counters();
  const std::vector<size_t> counts(size_t(n), 5);  // equal blocks: MPI_Alltoall's case
  std::vector<uint16_t> send(5 * size_t(n)), recv(send.size());
  for (size_t i = 0; i < send.size(); ++i) send[i] = uint16_t(0xA000 + 16 * w.rank() + i / 5);
  w.all_to_all(send.data(), counts, recv.data(), counts, Precision::Bf16);
  for (size_t i = 0; i < recv.size(); ++i)
    ASSERT_EQ(recv[i], uint16_t(0xA000 + 16 * (i / 5) + w.rank()));
  const auto counters = log.counters();
  EXPECT_EQ(counters[CommOp::AllToAll].calls, 1u);
  EXPECT_EQ(counters[CommOp::AllToAll].bytes, 5u * 2u * size_t(n));
  EXPECT_DOUBLE_EQ(counters[CommOp::AllToAll].wire_bytes,
                   5.0 * 2 * n * double(n - 1) / double(n));
  EXPECT_EQ(log.last(1)[0].op, CommOp::AllToAll);
}

TEST(Collectives, AllToAllRefusesBadCountsBeforeSending) {
  Communicator& w = world();
  const int n = w.size();
  std::vector<float> buf(64);
  const std::vector<size_t> short_counts(size_t(n) + 1, 1);
  EXPECT_THROW(w.all_to_all(buf.data(), short_counts, buf.data() + 32, short_counts,
                            Precision::Fp32),
               Error);
  std::vector<size_t> send(size_t(n), 1), recv(size_t(n), 1);
  recv[size_t(w.rank())] = 2;  // its own block, sent as 1 and expected as 2
  EXPECT_THROW(w.all_to_all(buf.data(), send, buf.data() + 32, recv, Precision::Fp32), Error);
  recv[size_t(w.rank())] = 1;
  EXPECT_THROW(w.all_to_all(buf.data(), send, buf.data(), recv, Precision::Fp32), Error);
  w.barrier();  // every rank refused locally: the group is still in step
}

TEST(Collectives, SplitByParity) {
  Communicator& w = world();
  auto half = w.split(w.rank() % 2, w.rank(), "parity");
  ASSERT_NE(half, nullptr);
  EXPECT_EQ(half->size(), (w.size() + 1 - w.rank() % 2) / 2);
  EXPECT_EQ(half->rank(), w.rank() / 2);
  EXPECT_EQ(half->world_rank_of(half->rank()), w.rank());
  float sum_of_world_ranks = 0;
  for (int r = w.rank() % 2; r < w.size(); r += 2) sum_of_world_ranks += float(r);
  EXPECT_EQ(half->all_reduce_scalar(float(w.rank())), sum_of_world_ranks);
  auto nobody = w.split(w.rank() == 0 ? 0 : -1, 0, "only-zero");
  EXPECT_EQ(nobody != nullptr, w.rank() == 0);
}

TEST(Collectives, LogRecordsSequenceAndCounters) {
  Communicator& w = world();
  auto group = w.split(0, w.rank(), "counted");
  CollectiveLog& log = group->log();
  log.reset_counters();
  std::vector<float> v(1024, 1.0f);
  group->all_reduce(v);
  group->all_reduce_async(v).wait();
  std::vector<float> shard(1024 / size_t(w.size()));
  group->reduce_scatter(v, shard);
  const auto counters = log.counters();
  const double n = w.size();
  EXPECT_EQ(counters[CommOp::AllReduce].calls, 2u);
  EXPECT_EQ(counters[CommOp::AllReduce].bytes, 2u * 4096u);
  EXPECT_DOUBLE_EQ(counters[CommOp::AllReduce].wire_bytes, 2 * 4096 * 2 * (n - 1) / n);
  EXPECT_EQ(counters[CommOp::ReduceScatter].bytes, 4096u);
  EXPECT_DOUBLE_EQ(counters[CommOp::ReduceScatter].wire_bytes, 4096 * (n - 1) / n);
  EXPECT_EQ(counters.by_group.at("counted")[size_t(CommOp::AllReduce)].calls, 2u);

  const auto last = log.last(3);
  ASSERT_EQ(last.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(last[i].group, "counted");
    EXPECT_EQ(last[i].seq, i);
    EXPECT_GT(last[i].end, 0.0);
  }
  EXPECT_TRUE(last[1].async);
  EXPECT_EQ(last[2].op, CommOp::ReduceScatter);
}

TEST(Collectives, RejectsReductionsOnFp16) {
  std::vector<uint16_t> v(4);
  EXPECT_THROW(world().all_reduce(v.data(), v.size(), Precision::Fp16, ReduceOp::Sum), tessera::Error);
  EXPECT_THROW(world().reduce_scatter(v.data(), v.data(), 1, Precision::Fp16, ReduceOp::Sum),
               tessera::Error);
}

// ---- bf16 sums (--grad-reduce-in-bf16) ----------------------------------------

std::vector<bf16_t> bf16_contributions(int rank, size_t count) {
  std::vector<bf16_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = fp32_to_bf16(contribution(rank, i));
  return v;
}

// The contributions are halves below 12 and their sums below 64, all exact
// in bf16's 8 significant bits: the bf16 sum must give exactly the fp32 one,
// through MPI's user-defined operation and across the ring's pieces.
TEST(Collectives, Bf16AllReduceSumIsExactOnRepresentableValues) {
  Communicator& w = world();
  for (size_t count : kCounts) {
    auto v = bf16_contributions(w.rank(), count);
    w.all_reduce(v.data(), count, Precision::Bf16, ReduceOp::Sum);
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(bf16_to_fp32(v[i]), expected_sum(w.size(), i)) << count << " " << i;
  }
  auto m = bf16_contributions(w.rank(), 33);
  w.all_reduce(m.data(), m.size(), Precision::Bf16, ReduceOp::Max);
  for (size_t i = 0; i < m.size(); ++i) EXPECT_EQ(bf16_to_fp32(m[i]), contribution(w.size() - 1, i));
}

TEST(Collectives, Bf16ReduceScatterSumIsExactOnRepresentableValues) {
  Communicator& w = world();
  for (bool in_place : {false, true})
    for (size_t shard : {size_t(1), size_t(1000), size_t(65536 * 2 + 3)}) {
      const size_t total = shard * size_t(w.size());
      auto input = bf16_contributions(w.rank(), total);  // (size * shard)
      std::vector<bf16_t> separate(shard, 0xffff);         // (shard)
      bf16_t* out = in_place ? input.data() + size_t(w.rank()) * shard : separate.data();
      w.reduce_scatter(input.data(), out, shard, Precision::Bf16, ReduceOp::Sum);
      for (size_t j = 0; j < shard; ++j)
        ASSERT_EQ(bf16_to_fp32(out[j]), expected_sum(w.size(), size_t(w.rank()) * shard + j))
            << "shard " << shard << " element " << j << " in_place " << in_place;
    }
}

// Values that do not add exactly: each pairwise add rounds once to bf16, so
// the result is within (size - 1) roundings (2^-8 relative each, of a
// partial sum no larger than the sum of magnitudes) of the exact sum, and
// not simply one rank's value or the fp32 bits reinterpreted.
TEST(Collectives, Bf16SumsRoundOncePerStep) {
  Communicator& w = world();
  const size_t shard = 5000, total = shard * size_t(w.size());
  std::vector<std::vector<float>> all(size_t(w.size()), std::vector<float>(total));
  for (int r = 0; r < w.size(); ++r)
    for (size_t i = 0; i < total; ++i)
      all[size_t(r)][i] = bf16_to_fp32(fp32_to_bf16(rng_normal(77, uint64_t(r), i)));
  std::vector<bf16_t> a(total), rs(total);
  for (size_t i = 0; i < total; ++i) a[i] = rs[i] = fp32_to_bf16(all[size_t(w.rank())][i]);
  w.all_reduce(a.data(), total, Precision::Bf16, ReduceOp::Sum);
  std::vector<bf16_t> mine(shard);
  w.reduce_scatter(rs.data(), mine.data(), shard, Precision::Bf16, ReduceOp::Sum);
  size_t inexact = 0;
  for (size_t i = 0; i < total; ++i) {
    double exact = 0, mag = 0;
    for (int r = 0; r < w.size(); ++r) exact += all[size_t(r)][i], mag += std::abs(all[size_t(r)][i]);
    const double bound = double(w.size() - 1) * 0x1p-8 * mag + 1e-30;
    ASSERT_LE(std::abs(double(bf16_to_fp32(a[i])) - exact), bound) << "all_reduce element " << i;
    const size_t j = i - size_t(w.rank()) * shard;
    if (j < shard)
      ASSERT_LE(std::abs(double(bf16_to_fp32(mine[j])) - exact), bound) << "reduce_scatter " << i;
    inexact += double(bf16_to_fp32(a[i])) != exact;
  }
  if (w.size() > 1) EXPECT_GT(inexact, total / 4);  // the sums did round: the test can tell
}

}  // namespace
}  // namespace tessera::comm

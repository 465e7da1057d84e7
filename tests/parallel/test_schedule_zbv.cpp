// ZBV (issue 36): the V placement and its schedule as data, checked without
// a model or MPI: the placement, every rank's list, the transfers paired
// between neighbours, and the simulated run (no deadlock, memory within
// 1F1B's, and a bubble below ZB-H1's and 1F1B's with equal F, B, W); the
// engine's layout and executor are tested in tests/mpi/mpi_test_pipeline.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "expect_error.h"
#include "tessera/config/gpt_config.h"
#include "tessera/config/parallel_config.h"
#include "tessera/core/error.h"
#include "tessera/parallel/schedule.h"
#include "tessera/parallel/schedule_sim.h"

namespace tessera {
namespace {

using AT = ActionType;
constexpr ScheduleKind ZBV = ScheduleKind::ZeroBubbleV;
constexpr ChunkPlacement V = ChunkPlacement::V;

// Shapes: m below, equal to and above p; odd p.
std::vector<std::pair<int64_t, int64_t>> shapes() {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t p : {2, 3, 4, 5, 8})
    for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 16}) out.push_back({p, m});
  return out;
}

// Equal F, B, W: backward 2 = B 1 + W 1.
ScheduleCosts unit_costs() {
  ScheduleCosts c;
  c.forward = 1.0;
  c.backward = 2.0;
  c.weight_share = 0.5;
  return c;
}

TEST(ZeroBubbleV, ParsesAndValidates) {
  EXPECT_EQ(schedule_kind_parse("zbv"), ZBV);
  EXPECT_STREQ(schedule_kind_name(ZBV), "zbv");
  auto refused = [](int64_t p, int64_t v, std::vector<std::string> words) {
    EXPECT_TRUE(test::throws_error_with([&] { build_schedule(ZBV, p, v, 4, 0); }, words))
        << "p " << p << " v " << v;
  };
  refused(2, 1, {"--pipeline-schedule zbv needs --virtual-pipeline-stages 2 (got 1)"});
  refused(2, 3, {"--pipeline-schedule zbv needs --virtual-pipeline-stages 2 (got 3)"});
  refused(1, 2, {"--virtual-pipeline-stages 2", "--pipeline-model-parallel-size >= 2"});
  EXPECT_NO_THROW(schedule_validate(ZBV, 2, 2, 1));  // any m >= 1
  EXPECT_NO_THROW(schedule_validate(ZBV, 4, 2, 7));
}

// The engine runs zbv with two chunks per rank; like zb-h1 it refuses
// ZeRO-2/3 (a split backward keeps m layer gradients open), in one line.
TEST(ZeroBubbleV, EngineAcceptsItWithZeroZeroOrOne) {
  GPTConfig model;
  model.num_layers = 8;
  ParallelConfig par;
  par.pp = 2;
  par.micro_batch = 1;
  par.global_batch = 4;
  par.schedule = ZBV;
  par.virtual_stages = 1;
  EXPECT_TRUE(test::throws_error_with([&] { par.validate(model, 2); },
                                      {"--pipeline-schedule zbv needs --virtual-pipeline-stages 2"}));
  par.virtual_stages = 2;
  // Every ZeRO stage (2-3 since the split backward keeps a step-long
  // gradient buffer per layer: data_parallel.h).
  for (int zero : {0, 1, 2, 3}) {
    par.zero_stage = zero;
    EXPECT_NO_THROW(par.validate(model, 2)) << "zero " << zero;
  }
}

TEST(ZeroBubbleV, PlacementIsAV) {
  for (int64_t p : {2, 3, 4, 8}) {
    SCOPED_TRACE(fmt::format("p {}", p));
    EXPECT_EQ(chunk_placement(ZBV), V);
    for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved,
                           ScheduleKind::ZeroBubbleH1})
      EXPECT_EQ(chunk_placement(k), ChunkPlacement::RoundRobin);
    for (int64_t r = 0; r < p; ++r) {
      EXPECT_EQ(global_chunk(p, r, 0, V), r);
      EXPECT_EQ(global_chunk(p, r, 1, V), 2 * p - 1 - r);
      // RoundRobin as it always was
      EXPECT_EQ(global_chunk(p, r, 1), p + r);
    }
    for (int64_t g = 0; g < 2 * p; ++g)
      EXPECT_EQ(global_chunk(p, chunk_rank(p, g, V), chunk_local(p, g, V), V), g);
    // The last rank turns the V; rank 0 holds both ends.
    EXPECT_EQ(chunk_rank(p, p - 1, V), p - 1);
    EXPECT_EQ(chunk_rank(p, p, V), p - 1);
    EXPECT_EQ(chunk_rank(p, 0, V), 0);
    EXPECT_EQ(chunk_rank(p, 2 * p - 1, V), 0);
  }
}

// Every (micro-batch, chunk) has F, then B (BackwardInput), then W once; the
// B's and W's of a chunk in micro-batch order (the gradient sums add in
// 1F1B's order); each Recv right before its compute and each Send right
// after, except across the last rank's turn, which has no transfer and whose
// order the list itself keeps.
TEST(ZeroBubbleV, EveryMicroBatchHasFBWOnceInOrder) {
  for (auto [p, m] : shapes()) {
    SCOPED_TRACE(fmt::format("p {} m {}", p, m));
    PipelineSchedule s = build_pipeline(ZBV, p, 2, m);
    ASSERT_EQ(int64_t(s.ranks.size()), p);
    for (int64_t r = 0; r < p; ++r) {
      SCOPED_TRACE(fmt::format("rank {}", r));
      const auto& L = s.ranks[size_t(r)];
      EXPECT_EQ(L, build_schedule(ZBV, p, 2, m, r));
      std::map<std::tuple<AT, int64_t, int64_t>, size_t> at;
      for (size_t i = 0; i < L.size(); ++i) {
        ASSERT_NE(L[i].type, AT::Backward) << "unsplit backward in zbv";
        ASSERT_TRUE(at.emplace(std::tuple{L[i].type, L[i].micro_batch, L[i].chunk}, i).second)
            << "repeated: " << action_str(L[i]);
      }
      ASSERT_GE(L.size(), 2u);
      EXPECT_EQ(L[L.size() - 2].type, AT::ReduceGrads);
      EXPECT_EQ(L.back().type, AT::OptimizerStep);
      auto pos = [&](AT t, int64_t mb, int64_t j) {
        auto it = at.find({t, mb, j});
        return it == at.end() ? size_t(-1) : it->second;
      };
      int64_t counted = 2;
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t g = global_chunk(p, r, j, V);
        size_t last_b = 0, last_w = 0;
        for (int64_t mb = 0; mb < m; ++mb) {
          const size_t f = pos(AT::Forward, mb, j), b = pos(AT::BackwardInput, mb, j),
                       w = pos(AT::BackwardWeight, mb, j);
          ASSERT_NE(f, size_t(-1));
          ASSERT_NE(b, size_t(-1));
          ASSERT_NE(w, size_t(-1));
          EXPECT_LT(f, b);
          EXPECT_LT(b, w);
          if (mb > 0) {
            EXPECT_GT(b, last_b);
            EXPECT_GT(w, last_w);
          }
          last_b = b;
          last_w = w;
          counted += 3;
          const bool from_other = g > 0 && chunk_rank(p, g - 1, V) != r;
          const bool to_other = g < 2 * p - 1 && chunk_rank(p, g + 1, V) != r;
          if (from_other) {
            EXPECT_EQ(pos(AT::RecvActivation, mb, j), f - 1);
            EXPECT_EQ(pos(AT::SendGrad, mb, j), b + 1);
            counted += 2;
          } else {
            EXPECT_EQ(pos(AT::RecvActivation, mb, j), size_t(-1));
            EXPECT_EQ(pos(AT::SendGrad, mb, j), size_t(-1));
          }
          if (to_other) {
            EXPECT_EQ(pos(AT::SendActivation, mb, j), f + 1);
            EXPECT_EQ(pos(AT::RecvGrad, mb, j), b - 1);
            counted += 2;
          } else {
            EXPECT_EQ(pos(AT::SendActivation, mb, j), size_t(-1));
            EXPECT_EQ(pos(AT::RecvGrad, mb, j), size_t(-1));
          }
          // The same-rank hand-off on the last rank: chunk p-1 (local 0)
          // feeds chunk p (local 1) forward, and takes its gradient back.
          if (r == p - 1 && j == 1) {
            EXPECT_LT(pos(AT::Forward, mb, 0), f);
            EXPECT_LT(b, pos(AT::BackwardInput, mb, 0));
          }
        }
      }
      EXPECT_EQ(int64_t(L.size()), counted);  // nothing else in the list
    }
  }
}

// Per ordered pair of ranks and kind of message, the sender's sequence of
// (micro-batch, boundary) is the receiver's; one activation and one gradient
// per boundary but the last rank's turn (p - 1 -> p), and only neighbours.
TEST(ZeroBubbleV, EverySendHasItsRecvOnTheNeighbourInOrder) {
  for (auto [p, m] : shapes()) {
    SCOPED_TRACE(fmt::format("p {} m {}", p, m));
    PipelineSchedule s = build_pipeline(ZBV, p, 2, m);
    using Key = std::tuple<int64_t, int64_t, bool>;  // from, to, grad
    std::map<Key, std::vector<std::pair<int64_t, int64_t>>> sent, recvd;
    int64_t n_sent = 0;
    for (int64_t r = 0; r < p; ++r)
      for (const Action& a : s.ranks[size_t(r)]) {
        const bool grad = a.type == AT::SendGrad || a.type == AT::RecvGrad;
        std::pair<int64_t, int64_t> id{a.micro_batch, message_boundary(a, p, r, V)};
        if (a.type == AT::SendActivation || a.type == AT::SendGrad) {
          ASSERT_TRUE(a.peer_rank == r + 1 || a.peer_rank == r - 1) << action_str(a);
          EXPECT_NE(id.second, p - 1) << "a message across the same-rank turn";
          sent[{r, a.peer_rank, grad}].push_back(id);
          ++n_sent;
        }
        if (a.type == AT::RecvActivation || a.type == AT::RecvGrad)
          recvd[{a.peer_rank, r, grad}].push_back(id);
      }
    EXPECT_EQ(sent, recvd);
    EXPECT_EQ(n_sent, 2 * m * (2 * p - 2));
  }
}

// The simulator runs every shape to the end, with unit costs and with
// unequal ones (the list is the order of a finished greedy run, so no cost
// model can deadlock it); memory stays within 1F1B's peak: 2 min(m, p)
// chunk-activations of half a 1F1B stage each.
TEST(ZeroBubbleV, SimulatesWithoutDeadlockWithin1F1BMemory) {
  ScheduleCosts uneven;
  uneven.forward = 1.0;
  uneven.backward = 3.0;
  uneven.weight_share = 0.3;
  uneven.p2p_latency = 0.25;
  for (auto [p, m] : shapes()) {
    SCOPED_TRACE(fmt::format("p {} m {}", p, m));
    const PipelineSchedule s = build_pipeline(ZBV, p, 2, m);
    for (const ScheduleCosts& c : {unit_costs(), uneven}) {
      const SimResult res = simulate_schedule(s, c);
      ASSERT_FALSE(res.deadlock) << res.deadlock_report;
      for (int64_t r = 0; r < p; ++r) {
        EXPECT_NEAR(res.busy[size_t(r)], 2.0 * double(m) * (c.forward + c.backward), 1e-9);
        EXPECT_LE(res.peak_in_flight[size_t(r)], 2 * std::min(m, p)) << "rank " << r;
        EXPECT_EQ(res.peak_in_flight[size_t(r)], peak_in_flight(s.ranks[size_t(r)]));
      }
    }
  }
}

// The simulator follows the placement: with a cost per global chunk, rank r
// is busy with chunks r and 2p-1-r.
TEST(ZeroBubbleV, SimulatorFollowsThePlacement) {
  const int64_t p = 4, m = 4;
  ScheduleCosts c;
  for (int64_t g = 0; g < 2 * p; ++g) {
    c.forward_by_chunk.push_back(double(g + 1));
    c.backward_by_chunk.push_back(2.0 * double(g + 1));
  }
  const SimResult res = simulate_schedule(build_pipeline(ZBV, p, 2, m), c);
  ASSERT_FALSE(res.deadlock) << res.deadlock_report;
  for (int64_t r = 0; r < p; ++r)
    EXPECT_DOUBLE_EQ(res.busy[size_t(r)], double(m) * 3.0 * double((r + 1) + (2 * p - r)));
}

// With equal F, B, W the bubble is below ZB-H1's and 1F1B's (same model:
// ZBV's chunks are half a stage, the bubble fraction is relative to busy
// time), for the cases the issue names and for every m >= p here.
TEST(ZeroBubbleV, BubbleBelowZbH1And1F1BWithEqualCosts) {
  const ScheduleCosts unit = unit_costs();
  auto bubble = [&](ScheduleKind k, int64_t p, int64_t v, int64_t m) {
    const SimResult r = simulate_schedule(build_pipeline(k, p, v, m), unit, false);
    EXPECT_FALSE(r.deadlock) << r.deadlock_report;
    return r.bubble_fraction;
  };
  for (auto [p, m] : shapes()) {
    if (m < p) continue;
    SCOPED_TRACE(fmt::format("p {} m {}", p, m));
    const double zbv = bubble(ZBV, p, 2, m), zbh1 = bubble(ScheduleKind::ZeroBubbleH1, p, 1, m),
                 ob = bubble(ScheduleKind::OneFOneB, p, 1, m);
    EXPECT_LT(zbv, zbh1);
    EXPECT_LT(zbh1, ob);
  }
  for (int64_t p : {2, 4})
    for (int64_t m : {4, 8}) {
      const double zbv = bubble(ZBV, p, 2, m), zbh1 = bubble(ScheduleKind::ZeroBubbleH1, p, 1, m),
                   ob = bubble(ScheduleKind::OneFOneB, p, 1, m);
      EXPECT_LT(zbv, zbh1) << "p " << p << " m " << m;
      EXPECT_LT(zbv, ob) << "p " << p << " m " << m;
      std::printf("p %ld m %ld: bubble zbv %.4f zb-h1 %.4f 1f1b %.4f\n", long(p), long(m), zbv,
                  zbh1, ob);
    }
}

}  // namespace
}  // namespace tessera

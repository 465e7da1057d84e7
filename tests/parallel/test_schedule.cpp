// Pipeline schedules as data, checked without a model or MPI: structure of
// every rank's list, matching of transfers between neighbours, and the
// simulated run (deadlock-free, bubble, in-flight activations, timing).
#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <tuple>

#include "expect_error.h"
#include "tessera/core/error.h"
#include "tessera/model/param_layout.h"
#include "tessera/parallel/schedule.h"
#include "tessera/parallel/schedule_sim.h"

namespace tessera {
namespace {

using AT = ActionType;

struct Combo {
  ScheduleKind kind;
  int64_t p, v, m;
};

std::string name(const Combo& c) {
  return fmt::format("{} p={} v={} m={}", schedule_kind_name(c.kind), c.p, c.v, c.m);
}

// Many shapes: m below, equal to and above p; odd p; interleaved with m = p..4p.
std::vector<Combo> combos() {
  std::vector<Combo> out;
  for (int64_t p : {1, 2, 3, 4, 5, 8})
    for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 16}) {
      out.push_back({ScheduleKind::GPipe, p, 1, m});
      out.push_back({ScheduleKind::OneFOneB, p, 1, m});
    }
  for (int64_t p : {2, 3, 4, 8})
    for (int64_t v : {1, 2, 3, 4})
      for (int64_t k : {1, 2, 3, 4}) out.push_back({ScheduleKind::Interleaved, p, v, k * p});
  return out;
}

// The peak each schedule is built to reach on rank r (chunk-activations).
int64_t expected_peak(const Combo& c, int64_t r) {
  switch (c.kind) {
    case ScheduleKind::GPipe: return c.m;
    case ScheduleKind::OneFOneB: return std::min(c.m, c.p - r);
    case ScheduleKind::Interleaved:
      return std::min(c.m * c.v, (c.v - 1) * c.p + 2 * (c.p - r - 1) + 1);
    case ScheduleKind::ZeroBubbleH1: return std::min(c.m, c.p);
  }
  return -1;
}

// ---- parsing and validation --------------------------------------------------

TEST(Schedule, ParsesAndNamesKinds) {
  for (auto k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved})
    EXPECT_EQ(schedule_kind_parse(schedule_kind_name(k)), k);
  EXPECT_STREQ(schedule_kind_name(ScheduleKind::OneFOneB), "1f1b");
  EXPECT_TRUE(
      test::throws_error_with([] { schedule_kind_parse("zb-v"); }, {"--pipeline-schedule"}));
}

void expect_error(ScheduleKind k, int64_t p, int64_t v, int64_t m, std::vector<std::string> words) {
  EXPECT_TRUE(test::throws_error_with([&] { build_schedule(k, p, v, m, 0); }, words))
      << name({k, p, v, m});
}

TEST(Schedule, InvalidParametersNameTheFlag) {
  expect_error(ScheduleKind::OneFOneB, 0, 1, 4, {"--pipeline-model-parallel-size", "got 0"});
  expect_error(ScheduleKind::Interleaved, 2, 0, 4, {"--virtual-pipeline-stages", "got 0"});
  expect_error(ScheduleKind::GPipe, 2, 1, 0, {"global batch / (micro-batch x dp)"});
  expect_error(ScheduleKind::OneFOneB, 4, 2, 8, {"--virtual-pipeline-stages 2", "interleaved"});
  expect_error(ScheduleKind::Interleaved, 1, 2, 4,
               {"--virtual-pipeline-stages 2", "--pipeline-model-parallel-size >= 2"});
  expect_error(ScheduleKind::Interleaved, 4, 2, 6,
               {"global batch / (micro-batch x dp) = 6", "--pipeline-model-parallel-size (4)"});
  EXPECT_THROW(build_schedule(ScheduleKind::OneFOneB, 4, 1, 8, 4), Error);  // rank out of range
  EXPECT_NO_THROW(schedule_validate(ScheduleKind::Interleaved, 4, 2, 8));
}

// ---- chunk numbering agrees with the model's layer assignment ---------------

TEST(Schedule, ChunkNumberingMatchesStageLayers) {
  GPTConfig model;
  model.num_layers = 24;
  ParallelConfig par;
  par.pp = 4;
  par.virtual_stages = 3;
  int64_t per_chunk = model.num_layers / (par.pp * par.virtual_stages);
  for (int64_t r = 0; r < par.pp; ++r) {
    std::vector<int64_t> layers = stage_layers(model, par, r);
    ASSERT_EQ(int64_t(layers.size()), per_chunk * par.virtual_stages);
    for (int64_t j = 0; j < par.virtual_stages; ++j) {
      int64_t g = global_chunk(par.pp, r, j);
      EXPECT_EQ(chunk_rank(par.pp, g), r);
      EXPECT_EQ(chunk_local(par.pp, g), j);
      EXPECT_EQ(layers[size_t(j * per_chunk)], g * per_chunk) << "rank " << r << " chunk " << j;
    }
  }
}

// ---- exact lists for small shapes ---------------------------------------------

std::vector<std::string> strs(const std::vector<Action>& a) {
  std::vector<std::string> s;
  for (const auto& x : a) s.push_back(action_str(x));
  return s;
}

TEST(Schedule, OneFOneBExactListTwoStages) {
  using V = std::vector<std::string>;
  EXPECT_EQ(strs(build_schedule(ScheduleKind::OneFOneB, 2, 1, 3, 0)),
            (V{"F mb0 c0", "SendAct mb0 c0 -> r1",                          // warm-up: 1
               "F mb1 c0", "SendAct mb1 c0 -> r1", "RecvGrad mb0 c0 <- r1", "B mb0 c0",
               "F mb2 c0", "SendAct mb2 c0 -> r1", "RecvGrad mb1 c0 <- r1", "B mb1 c0",
               "RecvGrad mb2 c0 <- r1", "B mb2 c0",  // cool-down
               "ReduceGrads", "OptimizerStep"}));
  EXPECT_EQ(strs(build_schedule(ScheduleKind::OneFOneB, 2, 1, 3, 1)),
            (V{"RecvAct mb0 c0 <- r0", "F mb0 c0", "B mb0 c0", "SendGrad mb0 c0 -> r0",
               "RecvAct mb1 c0 <- r0", "F mb1 c0", "B mb1 c0", "SendGrad mb1 c0 -> r0",
               "RecvAct mb2 c0 <- r0", "F mb2 c0", "B mb2 c0", "SendGrad mb2 c0 -> r0",
               "ReduceGrads", "OptimizerStep"}));
}

std::vector<std::string> computes(const std::vector<Action>& a) {
  std::vector<std::string> s;
  for (const auto& x : a)
    if (x.type == AT::Forward || x.type == AT::Backward) s.push_back(action_str(x));
  return s;
}

TEST(Schedule, InterleavedOrderGroupsOfP) {
  using V = std::vector<std::string>;
  // p = 2, v = 2, m = 4: forward steps run mb 0,1 through chunk 0, then mb 0,1
  // through chunk 1, then mb 2,3 likewise; backward steps reverse the chunks.
  // Rank 1 warms up (v-1)*p = 2 steps, rank 0 two more.
  EXPECT_EQ(computes(build_schedule(ScheduleKind::Interleaved, 2, 2, 4, 1)),
            (V{"F mb0 c0", "F mb1 c0",                        // warm-up
               "F mb0 c1", "B mb0 c1", "F mb1 c1", "B mb1 c1",  // steady
               "F mb2 c0", "B mb0 c0", "F mb3 c0", "B mb1 c0",
               "F mb2 c1", "B mb2 c1", "F mb3 c1", "B mb3 c1",
               "B mb2 c0", "B mb3 c0"}));  // cool-down
  EXPECT_EQ(computes(build_schedule(ScheduleKind::Interleaved, 2, 2, 4, 0)),
            (V{"F mb0 c0", "F mb1 c0", "F mb0 c1", "F mb1 c1",
               "F mb2 c0", "B mb0 c1", "F mb3 c0", "B mb1 c1",
               "F mb2 c1", "B mb0 c0", "F mb3 c1", "B mb1 c0",
               "B mb2 c1", "B mb3 c1", "B mb2 c0", "B mb3 c0"}));
  // The last rank's chunk 0 feeds rank 0's chunk 1; rank 0's chunk 1 sends
  // its gradient back to the last rank's chunk 0.
  auto r0 = build_schedule(ScheduleKind::Interleaved, 2, 2, 4, 0);
  EXPECT_EQ(r0[0], (Action{AT::Forward, 0, 0, -1}));  // global chunk 0: no receive
  bool saw = false;
  for (const auto& a : r0)
    if (a.type == AT::RecvActivation && a.chunk == 1) {
      EXPECT_EQ(a.peer_rank, 1);
      saw = true;
    }
  EXPECT_TRUE(saw);
}

// ---- structure, for every combo -------------------------------------------------

TEST(Schedule, EveryComputeOnceForwardBeforeBackwardTransfersAround) {
  for (const Combo& c : combos()) {
    SCOPED_TRACE(name(c));
    PipelineSchedule s = build_pipeline(c.kind, c.p, c.v, c.m);
    const int64_t last = c.p * c.v - 1;
    for (int64_t r = 0; r < c.p; ++r) {
      SCOPED_TRACE(fmt::format("rank {}", r));
      const auto& L = s.ranks[size_t(r)];
      // position of each (type, mb, chunk); each must occur at most once
      std::map<std::tuple<AT, int64_t, int64_t>, size_t> at;
      for (size_t i = 0; i < L.size(); ++i) {
        bool fresh = at.emplace(std::tuple{L[i].type, L[i].micro_batch, L[i].chunk}, i).second;
        ASSERT_TRUE(fresh) << "repeated: " << action_str(L[i]);
      }
      ASSERT_GE(L.size(), 2u);
      EXPECT_EQ(L[L.size() - 2].type, AT::ReduceGrads);
      EXPECT_EQ(L.back().type, AT::OptimizerStep);
      int64_t computes = 0, transfers = 0;
      for (int64_t j = 0; j < c.v; ++j)
        for (int64_t mb = 0; mb < c.m; ++mb) {
          auto pos = [&](AT t) {
            auto it = at.find({t, mb, j});
            return it == at.end() ? size_t(-1) : it->second;
          };
          int64_t g = global_chunk(c.p, r, j);
          size_t f = pos(AT::Forward), b = pos(AT::Backward);
          ASSERT_NE(f, size_t(-1)) << "no forward mb " << mb << " chunk " << j;
          ASSERT_NE(b, size_t(-1)) << "no backward mb " << mb << " chunk " << j;
          EXPECT_LT(f, b);
          computes += 2;
          // Recv right before the compute that consumes it, Send right after.
          if (g > 0) {
            EXPECT_EQ(pos(AT::RecvActivation), f - 1);
            EXPECT_EQ(pos(AT::SendGrad), b + 1);
            transfers += 2;
          }
          if (g < last) {
            EXPECT_EQ(pos(AT::SendActivation), f + 1);
            EXPECT_EQ(pos(AT::RecvGrad), b - 1);
            transfers += 2;
          }
        }
      EXPECT_EQ(int64_t(L.size()), computes + transfers + 2);  // nothing else in the list
    }
  }
}

// ZB-H1's shapes: m below, equal to and above p; odd p.
std::vector<Combo> zb_combos() {
  std::vector<Combo> out;
  for (int64_t p : {2, 3, 4, 5, 8})
    for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 16}) out.push_back({ScheduleKind::ZeroBubbleH1, p, 1, m});
  return out;
}

std::vector<Combo> all_combos() {
  std::vector<Combo> out = combos(), zb = zb_combos();
  out.insert(out.end(), zb.begin(), zb.end());
  return out;
}

// For each ordered pair of ranks and each kind of message, the sender's
// sequence of (micro-batch, boundary) equals the receiver's.
TEST(Schedule, EverySendHasItsRecvOnTheNeighbourInOrder) {
  for (const Combo& c : all_combos()) {
    SCOPED_TRACE(name(c));
    PipelineSchedule s = build_pipeline(c.kind, c.p, c.v, c.m);
    using Key = std::tuple<int64_t, int64_t, bool>;  // from, to, grad
    std::map<Key, std::vector<std::pair<int64_t, int64_t>>> sent, recvd;
    int64_t n_sent = 0;
    for (int64_t r = 0; r < c.p; ++r)
      for (const Action& a : s.ranks[size_t(r)]) {
        bool grad = a.type == AT::SendGrad || a.type == AT::RecvGrad;
        std::pair<int64_t, int64_t> id{a.micro_batch, message_boundary(a, c.p, r)};
        if (a.type == AT::SendActivation || a.type == AT::SendGrad) {
          ASSERT_TRUE(a.peer_rank == (r + 1) % c.p || a.peer_rank == (r + c.p - 1) % c.p);
          sent[{r, a.peer_rank, grad}].push_back(id);
          ++n_sent;
        }
        if (a.type == AT::RecvActivation || a.type == AT::RecvGrad)
          recvd[{a.peer_rank, r, grad}].push_back(id);
      }
    EXPECT_EQ(sent, recvd);
    // one activation and one gradient per (micro-batch, chunk boundary)
    EXPECT_EQ(n_sent, 2 * c.m * (c.p * c.v - 1));
  }
}

// Evaluation's forward-only pass (issue 16): every (micro-batch, chunk)
// forward once, in (micro-batch, chunk) order, the transfers matched, and the
// simulator runs it to the end without a deadlock, for shapes the training
// schedules refuse too (interleaved with m not a multiple of p).
TEST(Schedule, ForwardOnlyRunsEveryChunkOnceWithoutDeadlock) {
  for (int64_t p : {1, 2, 3, 4})
    for (int64_t v : {1, 2, 3})
      for (int64_t m : {1, 2, 5}) {
        SCOPED_TRACE(fmt::format("p={} v={} m={}", p, v, m));
        PipelineSchedule s{ScheduleKind::GPipe, p, v, m, {}};
        for (int64_t r = 0; r < p; ++r) s.ranks.push_back(build_forward_schedule(p, v, m, r));
        int64_t sends = 0;
        for (int64_t r = 0; r < p; ++r) {
          std::vector<std::pair<int64_t, int64_t>> order;  // (mb, chunk) of each Forward
          for (const Action& a : s.ranks[size_t(r)]) {
            EXPECT_TRUE(a.type == AT::Forward || a.type == AT::SendActivation ||
                        a.type == AT::RecvActivation)
                << action_str(a);
            if (a.type == AT::Forward) order.push_back({a.micro_batch, a.chunk});
            if (a.type == AT::SendActivation) ++sends;
          }
          ASSERT_EQ(int64_t(order.size()), m * v);
          for (int64_t i = 0; i < m * v; ++i)
            EXPECT_EQ(order[size_t(i)], std::make_pair(i / v, i % v));
        }
        EXPECT_EQ(sends, m * (p * v - 1));
        const SimResult res = simulate_schedule(s);
        EXPECT_FALSE(res.deadlock) << res.deadlock_report;
      }
}

// ---- ZB-H1: the split backward ------------------------------------------------------

TEST(ZeroBubble, ParsesAndValidates) {
  EXPECT_EQ(schedule_kind_parse("zb-h1"), ScheduleKind::ZeroBubbleH1);
  EXPECT_STREQ(schedule_kind_name(ScheduleKind::ZeroBubbleH1), "zb-h1");
  expect_error(ScheduleKind::ZeroBubbleH1, 1, 1, 4,
               {"--pipeline-schedule zb-h1", "--pipeline-model-parallel-size >= 2", "got 1"});
  expect_error(ScheduleKind::ZeroBubbleH1, 2, 2, 4, {"--virtual-pipeline-stages 2", "interleaved"});
  EXPECT_NO_THROW(schedule_validate(ScheduleKind::ZeroBubbleH1, 2, 1, 1));  // any m >= 1
}

TEST(ZeroBubble, ExactListTwoStages) {
  using V = std::vector<std::string>;
  // Rank 0: 1F1B's order, each W right after its B (a lag of rank = 0).
  EXPECT_EQ(strs(build_schedule(ScheduleKind::ZeroBubbleH1, 2, 1, 3, 0)),
            (V{"F mb0 c0", "SendAct mb0 c0 -> r1",  // warm-up: 1
               "F mb1 c0", "SendAct mb1 c0 -> r1", "RecvGrad mb0 c0 <- r1", "BI mb0 c0", "W mb0 c0",
               "F mb2 c0", "SendAct mb2 c0 -> r1", "RecvGrad mb1 c0 <- r1", "BI mb1 c0", "W mb1 c0",
               "RecvGrad mb2 c0 <- r1", "BI mb2 c0", "W mb2 c0",  // cool-down
               "ReduceGrads", "OptimizerStep"}));
  // Rank 1: its W's one micro-batch behind its B's; the last one at the end.
  EXPECT_EQ(strs(build_schedule(ScheduleKind::ZeroBubbleH1, 2, 1, 3, 1)),
            (V{"RecvAct mb0 c0 <- r0", "F mb0 c0", "BI mb0 c0", "SendGrad mb0 c0 -> r0",
               "RecvAct mb1 c0 <- r0", "F mb1 c0", "BI mb1 c0", "SendGrad mb1 c0 -> r0", "W mb0 c0",
               "RecvAct mb2 c0 <- r0", "F mb2 c0", "BI mb2 c0", "SendGrad mb2 c0 -> r0", "W mb1 c0",
               "W mb2 c0", "ReduceGrads", "OptimizerStep"}));
}

// Every micro-batch: one F, one BI, one W, in that order, the transfers
// around F and BI as in 1F1B; no unsplit Backward; W's in micro-batch order
// (each is then the n-th writer of the weight gradients, as in 1F1B).
TEST(ZeroBubble, EveryMicroBatchHasFBWOnceInOrder) {
  for (const Combo& c : zb_combos()) {
    SCOPED_TRACE(name(c));
    const PipelineSchedule s = build_pipeline(c.kind, c.p, c.v, c.m);
    for (int64_t r = 0; r < c.p; ++r) {
      SCOPED_TRACE(fmt::format("rank {}", r));
      const auto& L = s.ranks[size_t(r)];
      std::map<std::tuple<AT, int64_t>, size_t> at;
      std::vector<int64_t> w_order;
      for (size_t i = 0; i < L.size(); ++i) {
        ASSERT_NE(L[i].type, AT::Backward) << "unsplit backward in zb-h1";
        ASSERT_TRUE(at.emplace(std::tuple{L[i].type, L[i].micro_batch}, i).second)
            << "repeated: " << action_str(L[i]);
        if (L[i].type == AT::BackwardWeight) w_order.push_back(L[i].micro_batch);
      }
      int64_t n = 2;  // ReduceGrads, OptimizerStep
      for (int64_t mb = 0; mb < c.m; ++mb) {
        auto pos = [&](AT t) {
          auto it = at.find({t, mb});
          return it == at.end() ? size_t(-1) : it->second;
        };
        const size_t f = pos(AT::Forward), b = pos(AT::BackwardInput), w = pos(AT::BackwardWeight);
        ASSERT_NE(f, size_t(-1));
        ASSERT_NE(b, size_t(-1));
        ASSERT_NE(w, size_t(-1));
        EXPECT_LT(f, b);
        EXPECT_LT(b, w);
        n += 3;
        if (r > 0) {
          EXPECT_EQ(pos(AT::RecvActivation), f - 1);
          EXPECT_EQ(pos(AT::SendGrad), b + 1);  // the input gradient leaves at once
          n += 2;
        }
        if (r < c.p - 1) {
          EXPECT_EQ(pos(AT::SendActivation), f + 1);
          EXPECT_EQ(pos(AT::RecvGrad), b - 1);
          n += 2;
        }
      }
      EXPECT_EQ(int64_t(L.size()), n);
      ASSERT_EQ(int64_t(w_order.size()), c.m);
      for (int64_t k = 0; k < c.m; ++k) EXPECT_EQ(w_order[size_t(k)], k);
    }
  }
}

// Equal F, B, W costs (backward 2 = B 1 + W 1): no deadlock, activations
// no more than 1F1B's peak, and the bubble a third of 1F1B's once m >= p
// ((p-1)/(3m) against (p-1)/m: every rank idles p - 1 units, not 3 (p - 1)),
// below it for every m.
TEST(ZeroBubble, SimulatedBubbleIsAThirdOf1F1BWithEqualCosts) {
  ScheduleCosts unit;
  unit.forward = 1.0;
  unit.backward = 2.0;
  unit.weight_share = 0.5;
  for (const Combo& c : zb_combos()) {
    SCOPED_TRACE(name(c));
    const SimResult zb = simulate_schedule(build_pipeline(c.kind, c.p, 1, c.m), unit);
    const SimResult ob =
        simulate_schedule(build_pipeline(ScheduleKind::OneFOneB, c.p, 1, c.m), unit);
    ASSERT_FALSE(zb.deadlock) << zb.deadlock_report;
    for (int64_t r = 0; r < c.p; ++r) EXPECT_DOUBLE_EQ(zb.busy[size_t(r)], 3.0 * double(c.m));
    // Memory: at most 1F1B's peak (rank 0's, min(m, p)) on every rank.
    const int64_t peak_1f1b = *std::max_element(ob.peak_in_flight.begin(), ob.peak_in_flight.end());
    EXPECT_EQ(peak_1f1b, std::min(c.m, c.p));
    for (int64_t r = 0; r < c.p; ++r) {
      EXPECT_EQ(zb.peak_in_flight[size_t(r)], std::min(c.m, c.p)) << "rank " << r;
      EXPECT_EQ(peak_in_flight(build_schedule(c.kind, c.p, 1, c.m, r)), std::min(c.m, c.p));
    }
    EXPECT_LT(zb.bubble_fraction, ob.bubble_fraction);
    if (c.m >= c.p) {
      EXPECT_DOUBLE_EQ(zb.makespan, 3.0 * double(c.m) + double(c.p - 1));
      EXPECT_NEAR(zb.bubble_fraction, double(c.p - 1) / (3.0 * double(c.m)), 1e-12);
      EXPECT_NEAR(ob.bubble_fraction, double(c.p - 1) / double(c.m), 1e-12);
    }
  }
  // The cases the issue names, spelled out.
  for (int64_t p : {2, 4})
    for (int64_t m : {4, 8}) {
      const double zb =
          simulate_schedule(build_pipeline(ScheduleKind::ZeroBubbleH1, p, 1, m), unit).bubble_fraction;
      const double ob =
          simulate_schedule(build_pipeline(ScheduleKind::OneFOneB, p, 1, m), unit).bubble_fraction;
      EXPECT_NEAR(zb * 3.0, ob, 1e-12) << "p " << p << " m " << m;
    }
}

TEST(ZeroBubble, SimulatorPricesBAndWApart) {
  PipelineSchedule s = build_pipeline(ScheduleKind::ZeroBubbleH1, 4, 1, 8);
  ScheduleCosts costs;
  costs.forward = 1.0;
  costs.backward = 4.0;
  costs.weight_share = 0.25;  // W 1, B 3
  const SimResult res = simulate_schedule(s, costs);
  ASSERT_FALSE(res.deadlock) << res.deadlock_report;
  for (int64_t r = 0; r < 4; ++r) {
    const auto& T = res.timeline[size_t(r)];
    const auto& L = s.ranks[size_t(r)];
    ASSERT_EQ(T.size(), L.size());
    for (size_t i = 0; i < T.size(); ++i) {
      if (L[i].type == AT::BackwardInput) EXPECT_DOUBLE_EQ(T[i].end - T[i].start, 3.0);
      if (L[i].type == AT::BackwardWeight) EXPECT_DOUBLE_EQ(T[i].end - T[i].start, 1.0);
    }
    EXPECT_DOUBLE_EQ(res.busy[size_t(r)], 8 * 5.0);
  }
  costs.weight_share = 1.5;
  EXPECT_TRUE(test::throws_error_with([&] { simulate_schedule(s, costs); }, {"weight_share"}));
}

// Per-chunk weight passes (the planner's: a chunk's W is its layers' weight
// gradients, so the head's chunk has a smaller share of its backward in W).
// p 2, m 4; rank 0 F 1, B 4 = BI 2 + W 2; rank 1 F 2, B 4 = BI 3 + W 1.
// Rank 1 sends its last input gradient at 1 + 4 (2 + 3) + 2 W = 23 (two W's
// went before it) and ends at 25; rank 0 then runs BI 2 + W 2: 27. One share
// of the whole backward (3/8: the same W in total) gives 26.
TEST(ZeroBubble, SimulatorTakesEachChunksWeightPass) {
  PipelineSchedule s = build_pipeline(ScheduleKind::ZeroBubbleH1, 2, 1, 4);
  ScheduleCosts costs;
  costs.forward_by_chunk = {1.0, 2.0};
  costs.backward_by_chunk = {4.0, 4.0};
  costs.weight_by_chunk = {2.0, 1.0};
  const SimResult res = simulate_schedule(s, costs);
  ASSERT_FALSE(res.deadlock) << res.deadlock_report;
  for (int64_t r = 0; r < 2; ++r) {
    const auto& T = res.timeline[size_t(r)];
    const auto& L = s.ranks[size_t(r)];
    for (size_t i = 0; i < T.size(); ++i) {
      if (L[i].type == AT::BackwardWeight)
        EXPECT_DOUBLE_EQ(T[i].end - T[i].start, r == 0 ? 2.0 : 1.0);
      if (L[i].type == AT::BackwardInput)
        EXPECT_DOUBLE_EQ(T[i].end - T[i].start, r == 0 ? 2.0 : 3.0);
    }
  }
  EXPECT_DOUBLE_EQ(res.finish[0], 27.0);
  EXPECT_DOUBLE_EQ(res.finish[1], 25.0);
  ScheduleCosts shared = costs;
  shared.weight_by_chunk.clear();
  shared.weight_share = 3.0 / 8.0;
  EXPECT_DOUBLE_EQ(simulate_schedule(s, shared).pipeline_time, 26.0);
  costs.weight_by_chunk = {1.0, 5.0};  // more than the chunk's backward
  EXPECT_TRUE(test::throws_error_with([&] { simulate_schedule(s, costs); }, {"weight pass"}));
  costs.weight_by_chunk = {1.0};
  EXPECT_TRUE(test::throws_error_with([&] { simulate_schedule(s, costs); }, {"weight_by_chunk"}));
}

// ---- simulation, for every combo -------------------------------------------------

TEST(ScheduleSim, UnitCostsGiveTheTextbookBubbleAndPeaks) {
  for (const Combo& c : combos()) {
    SCOPED_TRACE(name(c));
    PipelineSchedule s = build_pipeline(c.kind, c.p, c.v, c.m);
    const double want = double(c.p - 1) / double(c.v * c.m);
    for (double bwd : {1.0, 2.0}) {  // backward = forward, and = 2 x forward
      ScheduleCosts costs;
      costs.forward = 1.0;
      costs.backward = bwd;
      SimResult res = simulate_schedule(s, costs);
      ASSERT_FALSE(res.deadlock) << res.deadlock_report;
      const double ideal = double(c.v * c.m) * (1.0 + bwd);
      EXPECT_DOUBLE_EQ(res.makespan, ideal + double(c.p - 1) * (1.0 + bwd));
      EXPECT_DOUBLE_EQ(res.pipeline_time, res.makespan);  // reduce/step cost 0
      EXPECT_NEAR(res.bubble_fraction, want, 1e-12) << "backward " << bwd;
      for (int64_t r = 0; r < c.p; ++r) {
        EXPECT_DOUBLE_EQ(res.busy[size_t(r)], ideal);
        EXPECT_EQ(res.peak_in_flight[size_t(r)], expected_peak(c, r)) << "rank " << r;
        EXPECT_EQ(peak_in_flight(s.ranks[size_t(r)]), expected_peak(c, r)) << "rank " << r;
      }
    }
  }
}

TEST(ScheduleSim, PeakInFlightSpelledOut) {
  // p = 4, m = 8: 1F1B holds 4, 3, 2, 1 micro-batches; GPipe all 8 everywhere;
  // 1F1B with m = 2 < p is capped at m.
  auto peaks = [](ScheduleKind k, int64_t p, int64_t v, int64_t m) {
    return simulate_schedule(build_pipeline(k, p, v, m)).peak_in_flight;
  };
  using V = std::vector<int64_t>;
  EXPECT_EQ(peaks(ScheduleKind::OneFOneB, 4, 1, 8), (V{4, 3, 2, 1}));
  EXPECT_EQ(peaks(ScheduleKind::GPipe, 4, 1, 8), (V{8, 8, 8, 8}));
  EXPECT_EQ(peaks(ScheduleKind::OneFOneB, 4, 1, 2), (V{2, 2, 2, 1}));
  // interleaved p = 4, v = 2, m = 8: (v-1)p + 2(p-r-1) + 1 chunk-activations
  EXPECT_EQ(peaks(ScheduleKind::Interleaved, 4, 2, 8), (V{11, 9, 7, 5}));
}

TEST(ScheduleSim, TimelineIsOrderedAndCostsAreCharged) {
  PipelineSchedule s = build_pipeline(ScheduleKind::Interleaved, 4, 2, 8);
  ScheduleCosts costs;
  costs.forward = 1.5;
  costs.backward = 3.0;
  costs.reduce_grads = 2.0;
  costs.optimizer_step = 0.5;
  SimResult res = simulate_schedule(s, costs);
  ASSERT_FALSE(res.deadlock);
  ASSERT_EQ(res.timeline.size(), 4u);
  for (int64_t r = 0; r < 4; ++r) {
    const auto& T = res.timeline[size_t(r)];
    const auto& L = s.ranks[size_t(r)];
    ASSERT_EQ(T.size(), L.size());
    double t = 0;
    for (size_t i = 0; i < T.size(); ++i) {
      EXPECT_GE(T[i].start, t);
      double d = T[i].end - T[i].start;
      switch (L[i].type) {
        case AT::Forward: EXPECT_DOUBLE_EQ(d, 1.5); break;
        case AT::Backward: EXPECT_DOUBLE_EQ(d, 3.0); break;
        case AT::SendActivation:
        case AT::SendGrad: EXPECT_EQ(d, 0.0); break;
        case AT::ReduceGrads: EXPECT_DOUBLE_EQ(d, 2.0); break;
        case AT::OptimizerStep: EXPECT_DOUBLE_EQ(d, 0.5); break;
        default: break;  // a Recv waits as long as it must
      }
      t = T[i].end;
    }
    EXPECT_DOUBLE_EQ(res.finish[size_t(r)], t);
  }
  // The step-level costs come after the flush: rank 0 finishes the pipeline last.
  EXPECT_DOUBLE_EQ(res.pipeline_time, 16 * 4.5 + 3 * 4.5);
  EXPECT_DOUBLE_EQ(res.makespan, res.pipeline_time + 2.5);
  EXPECT_NEAR(res.bubble_fraction, 3.0 / 16.0, 1e-12);
}

TEST(ScheduleSim, TransferLatencyOnTheCriticalPath) {
  // GPipe: the first micro-batch crosses p-1 links down and p-1 back up.
  for (int64_t p : {2, 4, 8}) {
    ScheduleCosts costs;
    costs.p2p_latency = 0.25;
    costs.backward = 2.0;
    SimResult res = simulate_schedule(build_pipeline(ScheduleKind::GPipe, p, 1, 8), costs);
    ASSERT_FALSE(res.deadlock);
    EXPECT_DOUBLE_EQ(res.makespan, double(8 + p - 1) * 3.0 + 2.0 * double(p - 1) * 0.25);
  }
  // 1F1B with latency: never faster than without, never deadlocks.
  ScheduleCosts slow;
  slow.p2p_latency = 0.5;
  SimResult fast_res = simulate_schedule(build_pipeline(ScheduleKind::OneFOneB, 4, 1, 8));
  SimResult slow_res = simulate_schedule(build_pipeline(ScheduleKind::OneFOneB, 4, 1, 8), slow);
  ASSERT_FALSE(slow_res.deadlock);
  EXPECT_GT(slow_res.makespan, fast_res.makespan + 2.0 * 3 * 0.5 - 1e-12);
}

TEST(ScheduleSim, PerChunkCostsMakeTheSlowStageTheBottleneck) {
  // p = 2 GPipe, m = 4; rank 1's forward costs 3, everything else 1.
  // Rank 1's forwards end at 1 + 3*4 = 13; its backwards at 14..17; rank 0's
  // last backward follows at 18. Busy 8 + 16 = 24 -> bubble (2*18 - 24)/24.
  ScheduleCosts costs;
  costs.forward_by_chunk = {1.0, 3.0};
  SimResult res = simulate_schedule(build_pipeline(ScheduleKind::GPipe, 2, 1, 4), costs);
  ASSERT_FALSE(res.deadlock);
  EXPECT_DOUBLE_EQ(res.makespan, 18.0);
  EXPECT_DOUBLE_EQ(res.busy[0], 8.0);
  EXPECT_DOUBLE_EQ(res.busy[1], 16.0);
  EXPECT_DOUBLE_EQ(res.bubble_fraction, 0.5);
  costs.forward_by_chunk = {1.0};  // wrong length
  EXPECT_THROW(simulate_schedule(build_pipeline(ScheduleKind::GPipe, 2, 1, 4), costs), Error);
}

// ---- broken schedules ---------------------------------------------------------------

TEST(ScheduleSim, DetectsDeadlock) {
  // Rank 0 waits for micro-batch 0's gradient before running its forward:
  // the gradient needs that forward, so nobody can move.
  PipelineSchedule s = build_pipeline(ScheduleKind::OneFOneB, 2, 1, 4);
  auto& r0 = s.ranks[0];
  auto it = std::find(r0.begin(), r0.end(), Action{AT::RecvGrad, 0, 0, 1});
  ASSERT_NE(it, r0.end());
  Action wait = *it;
  r0.erase(it);
  r0.insert(r0.begin(), wait);
  SimResult res = simulate_schedule(s);
  EXPECT_TRUE(res.deadlock);
  EXPECT_NE(res.deadlock_report.find("2 of 2 ranks"), std::string::npos) << res.deadlock_report;
  EXPECT_NE(res.deadlock_report.find("rank 0 waits at action 0 'RecvGrad mb0 c0 <- r1'"),
            std::string::npos)
      << res.deadlock_report;
  EXPECT_NE(res.deadlock_report.find("rank 1 waits at action 0 'RecvAct mb0 c0 <- r0'"),
            std::string::npos)
      << res.deadlock_report;

  // A missing send (the last rank's chunk 0 -> rank 0's chunk 1) leaves its
  // receiver stuck, and with it everyone waiting on the receiver.
  PipelineSchedule t = build_pipeline(ScheduleKind::Interleaved, 4, 2, 8);
  auto& r3 = t.ranks[3];
  r3.erase(std::find(r3.begin(), r3.end(), Action{AT::SendActivation, 5, 0, 0}));
  SimResult res2 = simulate_schedule(t);
  EXPECT_TRUE(res2.deadlock);
  EXPECT_NE(res2.deadlock_report.find("rank 0 waits at"), std::string::npos);
  EXPECT_NE(res2.deadlock_report.find("'RecvAct mb5 c1 <- r3'"), std::string::npos)
      << res2.deadlock_report;
}

TEST(ScheduleSim, MalformedTransfersThrow) {
  PipelineSchedule s = build_pipeline(ScheduleKind::OneFOneB, 4, 1, 4);
  s.ranks[1][2].peer_rank = 3;  // rank 1's first SendAct to the wrong neighbour
  ASSERT_EQ(s.ranks[1][2].type, AT::SendActivation);
  EXPECT_THROW(simulate_schedule(s), Error);

  PipelineSchedule u = build_pipeline(ScheduleKind::OneFOneB, 2, 1, 2);
  auto& r1 = u.ranks[1];
  r1.erase(std::find(r1.begin(), r1.end(), Action{AT::RecvActivation, 1, 0, 0}));
  EXPECT_TRUE(test::throws_error_with([&] { simulate_schedule(u); },
                                      {"activation of micro-batch 1 across chunk boundary 0 -> 1 "
                                       "is sent but never received"}));
}

// ---- speed: the planner simulates the 1T layout (p = 128, m ~ 1000) in its search ----

TEST(ScheduleSim, FrontierScaleIsFast) {
  // CPU time, not wall time: this box is shared, and the question is how
  // much work one simulation is, not how busy the neighbours are.
  auto cpu_ms = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
  };
  for (auto [kind, v] : {std::pair{ScheduleKind::OneFOneB, int64_t(1)},
                         std::pair{ScheduleKind::Interleaved, int64_t(2)}}) {
    double build_ms = 1e9, sim_ms = 1e9, bare_ms = 1e9;
    SimResult res;
    for (int rep = 0; rep < 3; ++rep) {
      double t0 = cpu_ms();
      PipelineSchedule s = build_pipeline(kind, 128, v, 1024);
      double t1 = cpu_ms();
      res = simulate_schedule(s, {}, true);
      double t2 = cpu_ms();
      SimResult bare = simulate_schedule(s, {}, false);  // what the planner's search calls
      double t3 = cpu_ms();
      EXPECT_EQ(bare.makespan, res.makespan);
      EXPECT_TRUE(bare.timeline.empty());
      build_ms = std::min(build_ms, t1 - t0);
      sim_ms = std::min(sim_ms, t2 - t1);
      bare_ms = std::min(bare_ms, t3 - t2);
    }
    ASSERT_FALSE(res.deadlock);
    EXPECT_NEAR(res.bubble_fraction, 127.0 / double(1024 * v), 1e-12);
    std::printf("p=128 v=%ld m=1024 %s: build %.1f ms, simulate %.1f ms with timeline, %.1f ms "
                "without (CPU)\n",
                long(v), schedule_kind_name(kind), build_ms, sim_ms, bare_ms);
    EXPECT_LT(sim_ms, 100.0);
  }
}

}  // namespace
}  // namespace tessera

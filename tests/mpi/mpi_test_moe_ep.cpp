// Expert parallelism (model/expert_parallel.h): the grid's expert-parallel
// and expert-data-parallel groups, and one MoE layer whose experts are
// spread over the ep ranks against one process running the same layer with
// all E experts on each rank's micro-batch.
//
// Every rank knows every rank's micro-batch (drawn from the rank number),
// so it runs the one-process reference for all of them itself: its own
// output and input gradient must equal the reference on its micro-batch,
// its experts' weight gradients the reference's summed over the ep group's
// micro-batches (what one process accumulates over them), and the router's
// gradient, summed over the group, the reference's sum. Both dispatchers,
// dropless and a capacity that drops, GELU and SwiGLU experts.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "mpi_test_env.h"
#include "tessera/comm/collective_log.h"
#include "tessera/comm/grid.h"
#include "tessera/kernels/cpu_backend_info.h"
#include "tessera/kernels/moe_stats.h"
#include "tessera/model/expert_parallel.h"
#include "tessera/model/moe_layer.h"

namespace tessera {
namespace {

using test::world;

void check_group(comm::Communicator& group, const std::vector<int>& members, int my_index) {
  EXPECT_EQ(group.size(), int(members.size()));
  EXPECT_EQ(group.rank(), my_index);
  EXPECT_EQ(group.world_ranks(), members);
  float sum = 0;
  for (int r : members) sum += float(r);
  EXPECT_EQ(group.all_reduce_scalar(float(world().rank())), sum);
}

// One grid per (tp, ep), kept for the binary (the progress board holds every
// group for the life of the process).
comm::Grid& grid_of(int tp, int ep) {
  static std::map<std::pair<int, int>, std::unique_ptr<comm::Grid>> grids;
  auto& g = grids[{tp, ep}];
  if (!g) {
    ParallelConfig par{.tp = tp, .ep = ep};
    par.set_world(world().size());
    g = std::make_unique<comm::Grid>(world(), par);
  }
  return *g;
}

// Every (tp, ep > 1) the world allows: the groups split as GridLayout names
// them, inside the rank's dp group (cp = 1: dp x cp is dp). ep = 1 splits
// nothing: no ep group, and expert_dp() is the dp x cp group itself.
TEST(ExpertGrid, GroupsSplitTheDataParallelRanks) {
  comm::Communicator& w = world();
  if (w.size() < 2) GTEST_SKIP() << "needs 2 or more ranks";
  for (int tp : {1, 2}) {
    for (int ep : {2, 4}) {
      if (w.size() % (tp * ep) != 0) continue;
      SCOPED_TRACE(fmt::format("tp {} ep {}", tp, ep));
      comm::Grid& grid = grid_of(tp, ep);
      const comm::GridLayout& l = grid.layout();
      const comm::GridCoord c = grid.coord();
      ASSERT_NE(grid.ep(), nullptr);
      check_group(*grid.ep(), l.ep_group(w.rank()), c.dp % ep);
      check_group(grid.expert_dp(), l.expert_dp_group(w.rank()), c.dp / ep);
    }
  }
  comm::Grid& dense = test::grid_of(1);
  EXPECT_EQ(dense.ep(), nullptr);
  EXPECT_EQ(&dense.expert_dp(), &dense.dp_cp());
}

constexpr int64_t kB = 2, kT = 6, kC = 8, kF = 12, kE = 4, kK = 2;

std::vector<float> draw(uint64_t seed, int64_t n, float scale) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(g);
  return v;
}

// The layer's parameters, all E experts (what one process holds).
struct Params {
  std::vector<float> router, fc_w, fc_b, proj_w, proj_b;  // (E, C), (E, Ff, C), (E, Ff), (E, C, F), (E, C)
};

Params params(const ActShape& s, uint64_t seed) {
  return {draw(seed + 1, s.E * s.C, 0.5f), draw(seed + 2, s.E * s.Ff() * s.C, 0.3f),
          draw(seed + 3, s.E * s.Ff(), 0.1f), draw(seed + 4, s.E * s.C * s.F, 0.3f),
          draw(seed + 5, s.E * s.C, 0.1f)};
}
Params zeros_like(const Params& p) {
  auto z = [](const std::vector<float>& v) { return std::vector<float>(v.size(), 0.0f); };
  return {z(p.router), z(p.fc_w), z(p.fc_b), z(p.proj_w), z(p.proj_b)};
}

// Views of p, all E experts.
LayerWeights view(Params& p) {
  LayerWeights w;
  w.router_w = p.router.data();
  w.experts_fc_w = p.fc_w.data();
  w.experts_fc_b = p.fc_b.data();
  w.experts_proj_w = p.proj_w.data();
  w.experts_proj_b = p.proj_b.data();
  return w;
}

// The source-side views and backward scratch of one layer, owned.
struct Buffers {
  std::vector<float> logits, gates, stats, xs, h, act, ys;
  std::vector<int32_t> idx, slot, counts;
  std::vector<float> dys, dact, dh, dxs, dgates, dlogits;
  MoeActs m;
  Activations scratch;
  explicit Buffers(const ActShape& s) {
    const int64_t N = s.N(), R = s.R();
    logits.resize(size_t(N * s.E)), gates.resize(size_t(N * s.K));
    stats.resize(size_t(kernels::kMoeStats + s.E));
    xs.resize(size_t(R * s.C)), h.resize(size_t(R * s.Ff())), act.resize(size_t(R * s.F));
    ys.resize(size_t(R * s.C));
    idx.resize(size_t(N * s.K)), slot.resize(size_t(N * s.K)), counts.resize(size_t(s.E));
    dys.resize(size_t(R * s.C)), dact.resize(size_t(R * s.F)), dh.resize(size_t(R * s.Ff()));
    dxs.resize(size_t(R * s.C)), dgates.resize(size_t(N * s.K)), dlogits.resize(size_t(N * s.E));
    m.logits = logits.data(), m.idx = idx.data(), m.gates = gates.data();
    m.slot = slot.data(), m.counts = counts.data(), m.stats = stats.data();
    m.xs = xs.data(), m.h = h.data(), m.act = act.data(), m.ys = ys.data();
    scratch.moe_dys = dys.data(), scratch.moe_dact = dact.data(), scratch.moe_dh = dh.data();
    scratch.moe_dxs = dxs.data(), scratch.moe_dgates = dgates.data();
    scratch.moe_dlogits = dlogits.data();
    scratch.moe_loss_scale = 1.0f;
  }
};

// The expert side under expert parallelism, owned.
struct EpBuffers {
  std::vector<float> all_counts, xe, h, act, xfer, dye, dact, dh, dxe;
  EpMoeActs x;
  EpMoeScratch xs;
  EpBuffers(const ActShape& s, const ExpertParallel& group) {
    const int64_t ep = group.size(), Rx = ep_expert_rows(s, ep);
    all_counts.resize(size_t(ep * s.E));
    for (auto* v : {&xe, &xfer, &dye, &dxe}) v->resize(size_t(Rx * s.C));
    for (auto* v : {&h, &dh}) v->resize(size_t(Rx * s.Ff()));
    for (auto* v : {&act, &dact}) v->resize(size_t(Rx * s.F));
    xs = {xfer.data(), dye.data(), dact.data(), dh.data(), dxe.data()};
    x = {&group, &xs, all_counts.data(), xe.data(), h.data(), act.data()};
  }
};

double max_rel(const float* a, const float* b, int64_t n) {
  double diff = 0, scale = 1e-12;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, double(std::fabs(a[i] - b[i])));
    scale = std::max(scale, double(std::fabs(b[i])));
  }
  return diff / scale;
}

struct Case {
  MoeDispatcher dispatcher;
  bool drops;   // a capacity that drops choices, or dropless
  bool swiglu;
};

void run_layer(int ep_size, const Case& c) {
  comm::Grid& grid = grid_of(1, ep_size);
  comm::Communicator& group = *grid.ep();
  const int64_t P = group.size(), r = group.rank();
  // The micro-batches' owners: the members of this rank's ep group.
  const std::vector<int> members = group.world_ranks();
  ActShape s;
  s.B = kB, s.T = kT, s.C = kC, s.F = kF, s.E = kE, s.K = kK, s.swiglu = c.swiglu;
  // Capacity 3 of a micro-batch's 24 choices over 4 experts (6 each on
  // average): drops; N: dropless.
  s.capacity = c.drops ? 3 : s.N();
  s.moe_aux_coeff = 0.01f, s.moe_z_coeff = 0.001f, s.moe_aux_group = s.N();
  const int64_t N = s.N(), C = s.C;
  const kernels::Ops ops(kernels::cpu_backend(), nullptr);
  Params p = params(s, 7);
  auto ln2_of = [&](int world_rank) { return draw(100 + world_rank, N * C, 1.0f); };
  auto dout_of = [&](int world_rank) { return draw(200 + world_rank, N * C, 1.0f); };

  // The one process: each micro-batch of the group in turn, gradients
  // accumulated as over a step's micro-batches.
  Params ref_grad = zeros_like(p);
  std::vector<float> ref_out, ref_dln2;
  float ref_dropped = 0;
  for (int64_t i = 0; i < P; ++i) {
    Buffers b(s);
    const std::vector<float> ln2 = ln2_of(members[size_t(i)]);
    const std::vector<float> dout = dout_of(members[size_t(i)]);
    std::vector<float> out(size_t(N * C)), dln2(size_t(N * C));
    const LayerWeights w = view(p);
    moe_forward(ops, w, b.m, ln2.data(), out.data(), s);
    moe_backward(ops, w, view(ref_grad), b.m, ln2.data(), dout.data(), dln2.data(), b.scratch,
                 s, /*add_dw=*/true);
    if (i == r) ref_out = out, ref_dln2 = dln2, ref_dropped = b.stats[kernels::kMoeDropped];
  }
  if (c.drops) EXPECT_GT(ref_dropped, 0.0f) << "the capacity should drop choices";

  // Expert parallelism: this rank's micro-batch, El experts.
  const ExpertParallel ep{&group, c.dispatcher};
  Params grad = zeros_like(p);
  Buffers b(s);
  EpBuffers e(s, ep);
  const std::vector<float> ln2 = ln2_of(world().rank());
  const std::vector<float> dout = dout_of(world().rank());
  std::vector<float> out(size_t(N * C)), dln2(size_t(N * C));
  group.log().reset_counters();
  const LayerWeights w = ep_local_experts(view(p), s, P, r);
  moe_forward_ep(ops, w, b.m, e.x, ln2.data(), out.data(), s);
  moe_backward_ep(ops, w, ep_local_experts(view(grad), s, P, r), b.m, e.x, ln2.data(),
                  dout.data(), dln2.data(), b.scratch, s, /*add_dw=*/true);
  const comm::CommCounters counts = group.log().counters();

  EXPECT_LE(max_rel(out.data(), ref_out.data(), N * C), 1e-5);
  EXPECT_LE(max_rel(dln2.data(), ref_dln2.data(), N * C), 1e-5);
  EXPECT_EQ(b.stats[kernels::kMoeDropped], ref_dropped);  // the same drops, in token order
  // This rank's experts' gradients: the group's micro-batches summed.
  const int64_t El = s.E / P;
  const LayerWeights mine = ep_local_experts(view(grad), s, P, r);
  const LayerWeights ref = ep_local_experts(view(ref_grad), s, P, r);
  EXPECT_LE(max_rel(mine.experts_fc_w, ref.experts_fc_w, El * s.Ff() * C), 1e-5);
  EXPECT_LE(max_rel(mine.experts_fc_b, ref.experts_fc_b, El * s.Ff()), 1e-5);
  EXPECT_LE(max_rel(mine.experts_proj_w, ref.experts_proj_w, El * C * s.F), 1e-5);
  EXPECT_LE(max_rel(mine.experts_proj_b, ref.experts_proj_b, El * C), 1e-5);
  // The router is dense: each rank holds its micro-batch's share.
  group.all_reduce(std::span<float>(grad.router));
  EXPECT_LE(max_rel(grad.router.data(), ref_grad.router.data(), s.E * C), 1e-5);
  // Every exchange went through the communicator's log: alltoall twice
  // each way (forward and backward); allgather two gathers and two
  // reduce-scatters; both gather the counts once.
  const bool a2a = c.dispatcher == MoeDispatcher::AllToAll;
  EXPECT_EQ(counts[comm::CommOp::AllToAll].calls, a2a ? 4u : 0u);
  EXPECT_EQ(counts[comm::CommOp::ReduceScatter].calls, a2a ? 0u : 2u);
  EXPECT_EQ(counts[comm::CommOp::AllGather].calls, a2a ? 1u : 3u);
}

class ExpertLayer : public ::testing::TestWithParam<Case> {};

TEST_P(ExpertLayer, EqualsOneProcessOnTheGroupsMicroBatches) {
  const int n = world().size();
  if (n < 2) GTEST_SKIP() << "needs 2 or more ranks";
  for (int ep : {2, 4}) {
    if (n % ep != 0 || kE % ep != 0) continue;
    SCOPED_TRACE(fmt::format("ep {}", ep));
    run_layer(ep, GetParam());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Dispatchers, ExpertLayer,
    ::testing::Values(Case{MoeDispatcher::AllToAll, false, false},
                      Case{MoeDispatcher::AllToAll, true, false},
                      Case{MoeDispatcher::AllToAll, true, true},
                      Case{MoeDispatcher::AllGather, false, false},
                      Case{MoeDispatcher::AllGather, true, true}),
    [](const auto& info) {
      const Case& c = info.param;
      return fmt::format("{}{}{}", moe_dispatcher_name(c.dispatcher),
                         c.drops ? "_capacity" : "_dropless", c.swiglu ? "_swiglu" : "");
    });

}  // namespace
}  // namespace tessera

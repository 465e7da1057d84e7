// Which network tier a parallel group's collectives use, when the groups do
// not tile the nodes (issue 13: tp 6 on 8-device nodes was priced on NVLink,
// and the search picked it because of that).
#include <gtest/gtest.h>

#include <fmt/core.h>

#include "tessera/plan/comm_model.h"
#include "tessera/core/error.h"
#include "tessera/plan/system.h"
#include "tiny_system_toml.h"

using namespace tessera::plan;

namespace {

// 8 devices per node on NVLink (tier ranks 8), InfiniBand across nodes (ranks 0).
SystemSpec dgx() {
  return load_system_file(std::string(TESSERA_SOURCE_DIR) + "/configs/systems/dgx-a100-80gb.toml");
}

bool inter_node(const SystemSpec& s, CommOp op, int64_t size, int64_t stride, int64_t world) {
  return group_tier(s, op, size, stride, world).ranks == 0;
}

}  // namespace

TEST(CommGroups, TensorGroupsThatDoNotDivideTheNodeCrossIt) {
  const SystemSpec s = dgx();
  ASSERT_EQ(s.devices_per_node, 8);
  // tp 6 x dp 8: group 1 is ranks 6-11, two on node 0 and four on node 1.
  EXPECT_TRUE(inter_node(s, CommOp::AllReduce, 6, 1, 48));
  EXPECT_TRUE(inter_node(s, CommOp::AllReduce, 3, 1, 24));
  // Dividing tp degrees stay on NVLink at any size.
  EXPECT_FALSE(inter_node(s, CommOp::AllReduce, 4, 1, 48));
  EXPECT_FALSE(inter_node(s, CommOp::AllReduce, 8, 1, 4096));
  // A job inside one node never leaves it, whatever the degree.
  EXPECT_FALSE(inter_node(s, CommOp::AllReduce, 6, 1, 6));
  // Without the job's size: one aligned group, as before.
  EXPECT_FALSE(inter_node(s, CommOp::AllReduce, 6, 1, 0));
}

TEST(CommGroups, DataParallelGroupsFollowTheirStride) {
  const SystemSpec s = dgx();
  // tp 2 x dp 4: each dp group {r, r+2, r+4, r+6} fills one node.
  EXPECT_FALSE(inter_node(s, CommOp::ReduceScatter, 4, 2, 16));
  // tp 3 x dp 2 x pp 4: the second stage's group {6, 9} straddles nodes 0 and 1.
  EXPECT_TRUE(inter_node(s, CommOp::ReduceScatter, 2, 3, 24));
}

TEST(CommGroups, EveryPipelineHopCounts) {
  const SystemSpec s = dgx();
  // tp 2 x dp 2 x pp 4 (16 ranks): stage 1 (ranks 4-7) sends to stage 2 on node 1.
  EXPECT_TRUE(inter_node(s, CommOp::Send, 2, 4, 16));
  // pp 2 of the same: both stages on node 0.
  EXPECT_FALSE(inter_node(s, CommOp::Send, 2, 4, 8));
  // The first/last stage pair of the tied embedding: ranks r and r + 12, r < 4.
  EXPECT_TRUE(inter_node(s, CommOp::AllReduce, 2, 12, 16));
}

TEST(CommGroups, AStraddlingGroupPaysTheInterNodeLinkWithoutAHierarchicalShortcut) {
  const SystemSpec s = dgx();
  const double bytes = 64e6;
  const CommCost inside = collective_cost(s, CommOp::AllReduce, bytes, 6, 1, 6);
  const CommCost across = collective_cost(s, CommOp::AllReduce, bytes, 6, 1, 48);
  EXPECT_EQ(inside.tier->ranks, 8);
  EXPECT_EQ(across.tier->ranks, 0);
  // The node-local runs of a tp-6 group are 2 and 4 ranks: no even
  // hierarchical split exists, so the whole ring runs at the slow link.
  EXPECT_STRNE(across.algorithm, "hierarchical");
  const double ratio = s.tiers.front().effective_bandwidth() / s.tiers.back().effective_bandwidth();
  EXPECT_NEAR(across.seconds / inside.seconds, ratio, 0.1 * ratio);
  // dp 16 with tp 1 still goes hierarchical: 8 members per node, aligned.
  EXPECT_STREQ(collective_cost(s, CommOp::AllReduce, bytes, 16, 1, 16).algorithm,
               "hierarchical");
}

// The O(1) rule in comm_model.cpp against every rank checked one by one, for
// every layout of up to 8 x 8 x 8 ranks on blocks of 2, 4 and 8.
TEST(CommGroups, TheClosedRuleAgreesWithEveryRankChecked) {
  SystemSpec s = dgx();
  for (int64_t block : {2, 4, 8}) {
    s.devices_per_node = block;
    s.tiers.front().ranks = block;
    for (int64_t tp = 1; tp <= 8; ++tp)
      for (int64_t dp = 1; dp <= 8; ++dp)
        for (int64_t pp = 1; pp <= 8; ++pp) {
          const int64_t world = tp * dp * pp;
          // Each dimension's groups (tp: stride 1; dp: stride tp) and the
          // pipeline's neighbour pairs (stride tp dp), rank by rank.
          auto brute = [&](CommOp op, int64_t size, int64_t stride) {
            for (int64_t r = 0; r < world; ++r) {
              int64_t first = r, last = r + stride;
              if (op == CommOp::Send) {
                if (last >= world) continue;
              } else {
                first = r - ((r / stride) % size) * stride;
                last = first + (size - 1) * stride;
              }
              if (first / block != last / block) return true;
            }
            return false;
          };
          const std::string what = fmt::format("tp {} dp {} pp {} block {}", tp, dp, pp, block);
          EXPECT_EQ(inter_node(s, CommOp::AllReduce, tp, 1, world),
                    brute(CommOp::AllReduce, tp, 1)) << what;
          EXPECT_EQ(inter_node(s, CommOp::ReduceScatter, dp, tp, world),
                    brute(CommOp::ReduceScatter, dp, tp)) << what;
          EXPECT_EQ(inter_node(s, CommOp::Send, 2, tp * dp, world),
                    brute(CommOp::Send, 2, tp * dp)) << what;
        }
  }
}

// A tier's measured collective factors (calibrate on a CPU: an MPI
// all-reduce also sums on the cores) scale each collective's bandwidth term
// alone; the latency terms and point-to-point messages keep the ring model.
TEST(CommFactors, EachCollectiveScalesItsOwnBandwidthTerm) {
  SystemSpec s;
  s.tiers = {NetworkTier{.name = "shm", .ranks = 0, .bandwidth = 10e9, .latency = 2e-6}};
  const double bytes = 16e6;
  auto cost = [&](CommOp op) { return collective_cost(s, op, bytes, 2, 1, 2).seconds; };
  const double ar = cost(CommOp::AllReduce), rs = cost(CommOp::ReduceScatter);
  const double ag = cost(CommOp::AllGather), p2p = cost(CommOp::Send);
  EXPECT_DOUBLE_EQ(ar, 2 * 2e-6 + bytes / 10e9);  // 2 ranks: 2 (n-1)/n = 1
  s.tiers[0].collective_factor = {3.0, 2.0, 1.5};
  EXPECT_DOUBLE_EQ(cost(CommOp::AllReduce), 2 * 2e-6 + 3.0 * bytes / 10e9);
  EXPECT_DOUBLE_EQ(cost(CommOp::ReduceScatter), 2e-6 + 2.0 * (rs - 2e-6));
  EXPECT_DOUBLE_EQ(cost(CommOp::AllGather), 2e-6 + 1.5 * (ag - 2e-6));
  EXPECT_DOUBLE_EQ(cost(CommOp::Send), p2p);
}

TEST(CommFactors, SystemFilesReadThemAndRejectNonPositive) {
  const std::string& base = kTinySystemToml;
  EXPECT_EQ(load_system_text(base, "k").tiers[0].collective_factor[0], 1.0);
  const SystemSpec s = load_system_text(
      base + "all_reduce_factor = 2.5\nreduce_scatter_factor = 1.25\nall_gather_factor = 1.5\n", "k");
  EXPECT_EQ(s.tiers[0].collective_factor[0], 2.5);
  EXPECT_EQ(s.tiers[0].collective_factor[1], 1.25);
  EXPECT_EQ(s.tiers[0].collective_factor[2], 1.5);
  try {
    load_system_text(base + "all_gather_factor = 0\n", "k");
    FAIL() << "a zero factor was accepted";
  } catch (const tessera::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'network[0].all_gather_factor' must be a finite number > 0"),
              std::string::npos)
        << e.what();
  }
}

// all_to_all (an expert-parallel token exchange) as a pairwise exchange:
// n - 1 messages a rank, and every block but the rank's own on its link once.
TEST(CommGroups, AllToAllIsPricedAsAPairwiseExchangeOnTheGroupsTier) {
  const SystemSpec s = dgx();
  const double bytes = 64e6;  // all one rank sends, its own block included
  const CommCost inside = collective_cost(s, CommOp::AllToAll, bytes, 8, 1, 8);
  ASSERT_EQ(inside.tier->ranks, 8);
  const NetworkTier& nvlink = *inside.tier;
  EXPECT_DOUBLE_EQ(inside.seconds,
                   7 * nvlink.latency + 7.0 / 8.0 * bytes / nvlink.effective_bandwidth());
  EXPECT_STREQ(inside.algorithm, "ring");
  // 16 ranks over two nodes: the whole exchange at the inter-node link (no
  // hierarchical form is priced for it).
  const CommCost across = collective_cost(s, CommOp::AllToAll, bytes, 16, 1, 16);
  ASSERT_EQ(across.tier->ranks, 0);
  EXPECT_DOUBLE_EQ(across.seconds, 15 * across.tier->latency +
                                       15.0 / 16.0 * bytes / across.tier->effective_bandwidth());
  EXPECT_GT(across.seconds, 2 * inside.seconds);
}

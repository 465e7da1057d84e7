// GridLayout arithmetic (no MPI): Megatron's rank order, group membership,
// validation messages naming the flags, the layout table.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "tessera/comm/grid_layout.h"
#include "tessera/core/error.h"

namespace tessera::comm {
namespace {

TEST(GridLayout, MegatronOrderOnSixteenRanks) {
  // Megatron's docstring example: 16 ranks, tp 2, pp 4 -> dp 2.
  const GridLayout l = GridLayout::make({.tp = 2, .pp = 4, .dp = 2}, 16);
  EXPECT_EQ(l.dp, 2);
  EXPECT_EQ(l.tp_group(0), (std::vector<int>{0, 1}));
  EXPECT_EQ(l.tp_group(5), (std::vector<int>{4, 5}));
  EXPECT_EQ(l.dp_group(0), (std::vector<int>{0, 2}));
  EXPECT_EQ(l.dp_group(13), (std::vector<int>{13, 15}));
  EXPECT_EQ(l.pp_group(0), (std::vector<int>{0, 4, 8, 12}));
  EXPECT_EQ(l.pp_group(7), (std::vector<int>{3, 7, 11, 15}));
  EXPECT_EQ(l.embedding_group(2), (std::vector<int>{2, 14}));
  EXPECT_EQ(l.embedding_group(14), (std::vector<int>{2, 14}));
  EXPECT_TRUE(l.embedding_group(6).empty());
  for (int r = 0; r < 16; ++r) EXPECT_EQ(l.rank_of(l.coord_of(r)), r);
  EXPECT_EQ(l.coord_of(11), (GridCoord{1, 1, 2}));
}

// Megatron-Core's order with context parallelism: tp fastest, then cp, then
// dp, then pp. 16 ranks, tp 2, cp 2, pp 2 -> dp 2:
//   rank = ((pp * dp + dp_rank) * cp + cp_rank) * tp + tp_rank.
TEST(GridLayout, ContextParallelSitsBetweenTpAndDp) {
  const GridLayout l = GridLayout::make({.tp = 2, .pp = 2, .dp = 2, .cp = 2}, 16);
  EXPECT_EQ(l.cp, 2);
  EXPECT_EQ(l.tp_group(0), (std::vector<int>{0, 1}));
  EXPECT_EQ(l.cp_group(0), (std::vector<int>{0, 2}));
  EXPECT_EQ(l.dp_group(0), (std::vector<int>{0, 4}));
  EXPECT_EQ(l.dp_cp_group(0), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(l.pp_group(0), (std::vector<int>{0, 8}));
  EXPECT_EQ(l.coord_of(13), (GridCoord{.tp = 1, .dp = 1, .pp = 1, .cp = 0}));
  EXPECT_EQ(l.cp_group(13), (std::vector<int>{13, 15}));
  EXPECT_EQ(l.dp_group(13), (std::vector<int>{9, 13}));
  EXPECT_EQ(l.dp_cp_group(13), (std::vector<int>{9, 11, 13, 15}));
  EXPECT_EQ(l.embedding_group(5), (std::vector<int>{5, 13}));
  for (int r = 0; r < 16; ++r) EXPECT_EQ(l.rank_of(l.coord_of(r)), r);
  // cp = 1: the dp x cp group is the dp group.
  const GridLayout flat = GridLayout::make({.tp = 2, .pp = 1, .dp = 2}, 4);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(flat.dp_cp_group(r), flat.dp_group(r));
  const std::string table = format_layout_table(l);
  EXPECT_NE(table.find("world 16 = tp 2 x cp 2 x dp 2 x pp 2"), std::string::npos) << table;
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 2 + 16);
}

TEST(GridLayout, ContextParallelSizeMustDivideTheWorld) {
  try {
    GridLayout::make({.tp = 2, .pp = 1, .dp = 1, .cp = 3}, 8);
    FAIL() << "accepted tp 2 x cp 3 on 8 ranks";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("--context-parallel-size (3)"), std::string::npos) << message;
    EXPECT_NE(message.find("world size 8"), std::string::npos) << message;
  }
  EXPECT_THROW(GridLayout::make({.tp = 1, .pp = 1, .dp = 1, .cp = 0}, 4), Error);
}

// Expert parallelism splits each dp x cp group (member m = dp * cp + cp
// rank): ep consecutive members exchange tokens, the members with the same
// m % ep hold the same experts. 16 ranks, tp 2, cp 2, pp 2, dp 2.
TEST(GridLayout, ExpertGroupsSplitTheDpCpGroup) {
  const GridLayout l = GridLayout::make({.tp = 2, .pp = 2, .dp = 2, .cp = 2, .ep = 2}, 16);
  EXPECT_EQ(l.ep, 2);
  EXPECT_EQ(l.dp_cp_group(0), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(l.ep_group(0), (std::vector<int>{0, 2}));
  EXPECT_EQ(l.expert_dp_group(0), (std::vector<int>{0, 4}));
  EXPECT_EQ(l.dp_cp_index(13), 2);  // dp 1, cp 0
  EXPECT_EQ(l.ep_group(13), (std::vector<int>{13, 15}));
  EXPECT_EQ(l.expert_dp_group(13), (std::vector<int>{9, 13}));
  // ep = dp x cp: one expert group per dp x cp group, expert-dp the rank alone.
  const GridLayout all = GridLayout::make({.tp = 2, .pp = 2, .dp = 2, .cp = 2, .ep = 4}, 16);
  EXPECT_EQ(all.ep_group(13), all.dp_cp_group(13));
  EXPECT_EQ(all.expert_dp_group(13), (std::vector<int>{13}));
  // ep = 1: the rank alone, and the dp x cp group.
  const GridLayout none = GridLayout::make({.tp = 1, .pp = 1, .dp = 4}, 4);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(none.ep_group(r), (std::vector<int>{r}));
    EXPECT_EQ(none.expert_dp_group(r), none.dp_cp_group(r));
  }
  const std::string table = format_layout_table(l);
  EXPECT_NE(table.find("ep 2 groups of consecutive dp x cp ranks, expert-dp 2"),
            std::string::npos)
      << table;
  EXPECT_EQ(format_layout_table(none).find("ep"), std::string::npos);
}

TEST(GridLayout, ExpertParallelSizeMustDivideTheDpCpRanks) {
  try {
    GridLayout::make({.tp = 2, .pp = 1, .dp = 3, .ep = 2}, 6);
    FAIL() << "accepted ep 2 over 3 data-parallel ranks";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("--expert-model-parallel-size (2) x --tensor-model-parallel-size (2) x "
                           "--pipeline-model-parallel-size (1) must divide the world size 6"),
              std::string::npos)
        << message;
  }
  EXPECT_THROW(GridLayout::make({.tp = 1, .pp = 1, .dp = 4, .ep = 0}, 4), Error);
}

TEST(GridLayout, SingleStageEmbeddingGroupIsTheRankAlone) {
  const GridLayout l = GridLayout::make({.tp = 2, .pp = 1, .dp = 2}, 4);
  EXPECT_EQ(l.embedding_group(3), (std::vector<int>{3}));
  EXPECT_EQ(l.pp_group(3), (std::vector<int>{3}));
}

TEST(GridLayout, RejectsLayoutsNamingTheFlags) {
  try {
    GridLayout::make({.tp = 3, .pp = 1, .dp = 1}, 4);
    FAIL() << "accepted tp 3 on 4 ranks";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("--tensor-model-parallel-size (3)"), std::string::npos) << message;
    EXPECT_NE(message.find("--pipeline-model-parallel-size (1)"), std::string::npos) << message;
    EXPECT_NE(message.find("world size 4"), std::string::npos) << message;
  }
  EXPECT_THROW(GridLayout::make({.tp = 2, .pp = 3, .dp = 1}, 8), Error);
  EXPECT_THROW(GridLayout::make({.tp = 0, .pp = 1, .dp = 1}, 8), Error);
  EXPECT_THROW(GridLayout::make({.tp = 1, .pp = -1, .dp = 1}, 8), Error);
}

TEST(GridLayout, TableHasOneRowPerRank) {
  const std::string table = format_layout_table(GridLayout::make({.tp = 2, .pp = 2, .dp = 2}, 8));
  EXPECT_NE(table.find("world 8 = tp 2 x dp 2 x pp 2"), std::string::npos) << table;
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 2 + 8);
}

}  // namespace
}  // namespace tessera::comm

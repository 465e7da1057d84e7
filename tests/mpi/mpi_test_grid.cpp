// Grid on the real world: coordinates, group membership and group ranks for
// every (tp, pp) the world size allows, and bad layouts rejected on all ranks.
#include <gtest/gtest.h>

#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "mpi_test_env.h"
#include "tessera/comm/grid.h"
#include "tessera/core/error.h"

namespace tessera::comm {
namespace {

using test::world;

float sum_of(const std::vector<int>& ranks) {
  return float(std::accumulate(ranks.begin(), ranks.end(), 0));
}

void check_group(Communicator& group, const std::vector<int>& members, int my_index) {
  EXPECT_EQ(group.size(), int(members.size()));
  EXPECT_EQ(group.rank(), my_index);
  EXPECT_EQ(group.world_ranks(), members);
  // A collective on the group sees exactly its members.
  EXPECT_EQ(group.all_reduce_scalar(float(world().rank())), sum_of(members));
}

TEST(Grid, EveryLayoutOfTheWorld) {
  Communicator& w = world();
  for (int tp : {1, 2, 4}) {
    for (int pp : {1, 2, 4}) {
      if (w.size() % (tp * pp) != 0) continue;
      SCOPED_TRACE("tp " + std::to_string(tp) + " pp " + std::to_string(pp));
      ParallelConfig par{.tp = tp, .pp = pp};
      par.set_world(w.size());
      Grid grid(w, par);
      const GridLayout& l = grid.layout();
      EXPECT_EQ(l.dp, w.size() / (tp * pp));
      const GridCoord c = grid.coord();
      EXPECT_EQ(w.rank(), c.pp * (l.dp * tp) + c.dp * tp + c.tp);  // Megatron order
      check_group(grid.tp(), l.tp_group(w.rank()), c.tp);
      check_group(grid.dp(), l.dp_group(w.rank()), c.dp);
      check_group(grid.pp(), l.pp_group(w.rank()), c.pp);
      const bool in_embedding = c.pp == 0 || c.pp == pp - 1;
      ASSERT_EQ(grid.embedding() != nullptr, in_embedding);
      if (in_embedding)
        check_group(*grid.embedding(), l.embedding_group(w.rank()), c.pp == 0 ? 0 : 1);
    }
  }
}

// Context parallelism: every (tp, cp) the world allows, with Megatron-Core's
// order (tp fastest, then cp, then dp) and the cp ring and dp x cp groups
// split as GridLayout names them. cp = 1 splits no cp group and dp_cp() is
// the dp group itself.
TEST(Grid, ContextParallelGroups) {
  Communicator& w = world();
  for (int tp : {1, 2}) {
    for (int cp : {1, 2, 4}) {
      if (w.size() % (tp * cp) != 0) continue;
      SCOPED_TRACE("tp " + std::to_string(tp) + " cp " + std::to_string(cp));
      ParallelConfig par{.tp = tp, .cp = cp};
      par.set_world(w.size());
      Grid grid(w, par);
      const GridLayout& l = grid.layout();
      const GridCoord c = grid.coord();
      EXPECT_EQ(l.dp, w.size() / (tp * cp));
      EXPECT_EQ(w.rank(), (c.dp * cp + c.cp) * tp + c.tp);
      check_group(grid.tp(), l.tp_group(w.rank()), c.tp);
      check_group(grid.dp(), l.dp_group(w.rank()), c.dp);
      check_group(grid.dp_cp(), l.dp_cp_group(w.rank()), c.dp * cp + c.cp);
      ASSERT_EQ(grid.cp() != nullptr, cp > 1);
      if (cp > 1) check_group(*grid.cp(), l.cp_group(w.rank()), c.cp);
      else EXPECT_EQ(&grid.dp_cp(), &grid.dp());
    }
  }
}

TEST(Grid, BadLayoutFailsOnEveryRankNamingTheFlags) {
  Communicator& w = world();
  for (auto [tp, pp] : {std::pair{3, 1}, std::pair{1, 3}, std::pair{w.size(), 2}, std::pair{0, 1}}) {
    int threw = 0;
    try {
      // dp 1: the world check (or tp >= 1) fails first whatever dp is.
      Grid grid(w, ParallelConfig{.tp = tp, .pp = pp, .dp = 1});
    } catch (const Error& e) {
      threw = 1;
      const std::string message = e.what();
      if (tp >= 1) {
        EXPECT_NE(message.find("--tensor-model-parallel-size"), std::string::npos) << message;
        EXPECT_NE(message.find("--pipeline-model-parallel-size"), std::string::npos) << message;
      }
    }
    EXPECT_EQ(threw, 1) << "tp " << tp << " pp " << pp;
    // Every rank threw, so all are still in step: this collective completes.
    EXPECT_EQ(w.all_reduce_scalar(float(threw)), float(w.size()));
  }
}

TEST(Grid, LayoutTableListsEveryRank) {
  Communicator& w = world();
  ParallelConfig par{.pp = w.size() > 1 ? 2 : 1};
  par.set_world(w.size());
  const GridLayout layout = GridLayout::make(par, w.size());
  std::istringstream table(format_layout_table(layout));
  std::string line;
  std::getline(table, line);  // title
  std::getline(table, line);  // column names
  int rows = 0;
  for (GridCoord c; std::getline(table, line); ++rows) {
    std::istringstream row(line);
    int rank = -1;
    row >> rank >> c.tp >> c.dp >> c.pp;
    EXPECT_EQ(rank, rows);
    EXPECT_EQ(c, layout.coord_of(rank)) << line;
  }
  EXPECT_EQ(rows, w.size());
}

}  // namespace
}  // namespace tessera::comm

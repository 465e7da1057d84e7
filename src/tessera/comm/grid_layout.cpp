#include "tessera/comm/grid_layout.h"

#include <fmt/format.h>

#include "tessera/core/error.h"

namespace tessera::comm {

GridLayout GridLayout::make(const ParallelConfig& par, int world) {
  par.validate_degrees(world);
  return {world, int(par.tp), int(par.pp), int(par.dp), int(par.cp), int(par.ep)};
}

std::vector<int> GridLayout::tp_group(int rank) const {
  GridCoord c = coord_of(rank);
  std::vector<int> out;
  for (c.tp = 0; c.tp < tp; ++c.tp) out.push_back(rank_of(c));
  return out;
}

std::vector<int> GridLayout::dp_group(int rank) const {
  GridCoord c = coord_of(rank);
  std::vector<int> out;
  for (c.dp = 0; c.dp < dp; ++c.dp) out.push_back(rank_of(c));
  return out;
}

std::vector<int> GridLayout::cp_group(int rank) const {
  GridCoord c = coord_of(rank);
  std::vector<int> out;
  for (c.cp = 0; c.cp < cp; ++c.cp) out.push_back(rank_of(c));
  return out;
}

std::vector<int> GridLayout::dp_cp_group(int rank) const {
  GridCoord c = coord_of(rank);
  std::vector<int> out;
  for (c.dp = 0; c.dp < dp; ++c.dp)
    for (c.cp = 0; c.cp < cp; ++c.cp) out.push_back(rank_of(c));
  return out;
}

namespace {

// The global rank of member m of `rank`'s dp x cp group (dp_cp_group's order).
int dp_cp_member(const GridLayout& l, int rank, int m) {
  GridCoord c = l.coord_of(rank);
  c.dp = m / l.cp;
  c.cp = m % l.cp;
  return l.rank_of(c);
}

}  // namespace

std::vector<int> GridLayout::ep_group(int rank) const {
  const int first = dp_cp_index(rank) / ep * ep;
  std::vector<int> out;
  for (int i = 0; i < ep; ++i) out.push_back(dp_cp_member(*this, rank, first + i));
  return out;
}

std::vector<int> GridLayout::expert_dp_group(int rank) const {
  const int slot = dp_cp_index(rank) % ep;
  std::vector<int> out;
  for (int m = slot; m < dp * cp; m += ep) out.push_back(dp_cp_member(*this, rank, m));
  return out;
}

std::vector<int> GridLayout::pp_group(int rank) const {
  GridCoord c = coord_of(rank);
  std::vector<int> out;
  for (c.pp = 0; c.pp < pp; ++c.pp) out.push_back(rank_of(c));
  return out;
}

bool GridLayout::in_embedding_group(int rank) const {
  const int stage = coord_of(rank).pp;
  return stage == 0 || stage == pp - 1;
}

std::vector<int> GridLayout::embedding_group(int rank) const {
  if (!in_embedding_group(rank)) return {};
  GridCoord c = coord_of(rank);
  c.pp = 0;
  std::vector<int> out{rank_of(c)};
  c.pp = pp - 1;
  if (pp > 1) out.push_back(rank_of(c));
  return out;
}

std::string format_layout_table(const GridLayout& l) {
  // The cp column only where there is context parallelism: the table of
  // every other run reads as it did.
  const bool cp = l.cp > 1, ep = l.ep > 1;
  std::string out =
      cp ? fmt::format("parallel layout: world {} = tp {} x cp {} x dp {} x pp {} (tp fastest, "
                       "then cp, then dp, then pp)\n",
                       l.world, l.tp, l.cp, l.dp, l.pp)
         : fmt::format("parallel layout: world {} = tp {} x dp {} x pp {} (tp fastest, then dp, "
                       "then pp)\n",
                       l.world, l.tp, l.dp, l.pp);
  // Likewise the ep column: each rank's expert-parallel rank.
  if (ep)
    out += fmt::format("  experts: ep {} groups of consecutive dp x cp ranks, expert-dp {}\n",
                       l.ep, l.dp * l.cp / l.ep);
  out += fmt::format("  {:>6} {:>4}{} {:>4} {:>4}{}  {}\n", "rank", "tp",
                     cp ? fmt::format(" {:>4}", "cp") : "", "dp", "pp",
                     ep ? fmt::format(" {:>4}", "ep") : "", "stage role");
  for (int r = 0; r < l.world; ++r) {
    const GridCoord c = l.coord_of(r);
    std::string role = l.pp == 1            ? "embedding + head"
                       : c.pp == 0          ? "embedding"
                       : c.pp == l.pp - 1   ? "head"
                                            : "";
    out += fmt::format("  {:>6} {:>4}{} {:>4} {:>4}{}  {}\n", r, c.tp,
                       cp ? fmt::format(" {:>4}", c.cp) : "", c.dp, c.pp,
                       ep ? fmt::format(" {:>4}", l.dp_cp_index(r) % l.ep) : "", role);
  }
  return out;
}

}  // namespace tessera::comm

#include "tessera/comm/grid.h"

namespace tessera::comm {

Grid::Grid(Communicator& world, const ParallelConfig& par)
    : layout_(GridLayout::make(par, world.size())),
      world_rank_(world.rank()),
      coord_(layout_.coord_of(world.rank())) {
  const int r = world_rank_;
  const GridLayout& L = layout_;
  const int column = r % (L.dp * L.cp * L.tp);  // the (tp, cp, dp) position, any stage
  // Colors name the group by what its members share; keys order them by the
  // coordinate that varies inside it, so group rank == that coordinate.
  tp_ = world.split(r / layout_.tp, coord_.tp, "tp");
  dp_ = world.split((coord_.pp * L.cp + coord_.cp) * L.tp + coord_.tp, coord_.dp, "dp");
  pp_ = world.split(column, coord_.pp, "pp");
  embedding_ = world.split(layout_.in_embedding_group(r) ? column : -1, coord_.pp, "embedding");
  if (L.cp > 1) {
    cp_ = world.split((coord_.pp * L.dp + coord_.dp) * L.tp + coord_.tp, coord_.cp, "cp");
    dp_cp_ = world.split(coord_.pp * L.tp + coord_.tp, coord_.dp * L.cp + coord_.cp, "dp_cp");
  }
  if (L.ep > 1) {
    // Both inside this rank's dp x cp group (the same pp and tp): the color
    // names that group, then the block of ep members (ep) or the slot in
    // each block (expert_dp).
    const int m = L.dp_cp_index(r), dense = coord_.pp * L.tp + coord_.tp;
    const int blocks = L.dp * L.cp / L.ep;
    ep_ = world.split(dense * blocks + m / L.ep, m % L.ep, "ep");
    expert_dp_ = world.split(dense * L.ep + m % L.ep, m / L.ep, "expert_dp");
  }
}

}  // namespace tessera::comm

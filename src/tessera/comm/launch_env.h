// The rank a launcher gave this process, read from its environment before
// MPI starts. MPI start-up takes about a second on a loaded node; work that
// rank 0 alone does and that should refuse at once (a --save directory
// another run is writing) can run before it and report after it.
#pragma once

namespace tessera::comm {

struct LaunchRank {
  int rank = 0;
  // true: a launcher variable named the rank (Open MPI's mpirun, PMIx, a PMI
  // launcher such as MPICH's or Intel MPI's). false: none did,
  // so the process was started alone (a world of one) or by a launcher not
  // known here; only MPI itself can tell those apart.
  bool named = false;
};

// OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK: the first that holds a whole
// number >= 0. (Not SLURM_PROCID: a batch script's step sets it to 0 for
// every process an unknown launcher starts inside it.)
LaunchRank launch_rank();

}  // namespace tessera::comm

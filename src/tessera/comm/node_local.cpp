#include "tessera/comm/node_local.h"

#include <mpi.h>
#include <omp.h>

#include <algorithm>

namespace tessera::comm {

int ranks_on_this_node() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return 1;
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int n = 1;
  MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  return n;
}

int default_threads_per_rank() { return std::max(1, omp_get_num_procs() / ranks_on_this_node()); }

}  // namespace tessera::comm

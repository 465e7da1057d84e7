#include "tessera/comm/node_local.h"

#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <atomic>

namespace tessera::comm {

namespace {

// 0 until the first count after MPI_Init; then the count, for the process's life.
std::atomic<int> g_node_ranks{0};

}  // namespace

int ranks_on_this_node() {
  if (const int n = g_node_ranks.load(); n > 0) return n;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return 1;
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int n = 1;
  MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  g_node_ranks.store(n);
  return n;
}

int default_threads_per_rank() { return std::max(1, omp_get_num_procs() / ranks_on_this_node()); }

}  // namespace tessera::comm

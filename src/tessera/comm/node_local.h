// Ranks that share this node, and the OpenMP threads each should use so that
// together they fill the node's cores without oversubscribing them (OpenMP
// threads spin while they wait: two ranks each running all-core teams on
// the same cores slow each other down many times over).
#pragma once

namespace tessera::comm {

// Number of world ranks on this node (MPI_Comm_split_type, shared memory).
// 1 when MPI is not initialised.
int ranks_on_this_node();

// max(1, cores available to this process / ranks_on_this_node()).
int default_threads_per_rank();

}  // namespace tessera::comm

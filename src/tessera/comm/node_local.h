// Ranks that share this node, and the OpenMP threads each should use so that
// together they fill the node's cores without oversubscribing them (OpenMP
// threads spin while they wait: two ranks each running all-core teams on
// the same cores slow each other down many times over).
#pragma once

namespace tessera::comm {

// Number of world ranks on this node (MPI_Comm_split_type, shared memory).
// 1 when MPI is not initialised. The first call after MPI_Init is collective
// over the world, so MpiRuntime makes it on every rank as it starts; later
// calls return that count without communicating, which lets a start-up
// check that one rank may skip (a rank-0-only error inside agree()) use it
// without leaving the other ranks waiting in MPI_Comm_split_type.
int ranks_on_this_node();

// max(1, cores available to this process / ranks_on_this_node()).
int default_threads_per_rank();

}  // namespace tessera::comm

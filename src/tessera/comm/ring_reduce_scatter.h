// Ring reduce-scatter over MPI_Sendrecv, for fp32 and bf16.
//
// Why not MPI_Reduce_scatter_block: in Open MPI 4.1.4 on one node it reaches
// 0.5-0.9 GB/s bus bandwidth where MPI_Allreduce reaches 2-5 GB/s, which
// would make ZeRO's reduce-scatter slower than the all-reduce it replaces.
// The ring (n-1 steps; step s passes the partial sum of block r-s-1 to the
// right neighbour and adds the block arriving from the left to this rank's
// own copy) moves the bandwidth-optimal (n-1)/n of the data. Each step goes
// in 256 KiB pieces, double-buffered: the received piece is still in cache
// for the add that follows (measured best among 64 KiB .. whole-block
// pieces), and the next piece is already in flight during the add.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <vector>

#include "tessera/comm/comm_op.h"
#include "tessera/core/dtype.h"

namespace tessera::comm {

inline constexpr size_t kRingPieceElements = 64 * 1024;  // 256 KiB of fp32

// send: size * shard_count elements; recv: shard_count elements, may alias
// send + rank * shard_count. `scratch` is grown as needed and kept by the
// caller so steady-state calls do not allocate.
void ring_reduce_scatter(MPI_Comm comm, const float* send, float* recv, size_t shard_count,
                         ReduceOp op, std::vector<float>& scratch);
// bf16 (--grad-reduce-in-bf16): bf16 travels (half the bytes) and each
// step's partial sum is rounded back to bf16 (reduce_into), as a bf16 ring
// all-reduce on a GPU does. The scratch is the same float vector, used as
// 16-bit words.
void ring_reduce_scatter(MPI_Comm comm, const bf16_t* send, bf16_t* recv, size_t shard_count,
                         ReduceOp op, std::vector<float>& scratch);

// dst[i] = a[i] (op) b[i]; dst may alias a or b element for element.
void reduce_into(float* dst, const float* a, const float* b, size_t count, ReduceOp op);
// bf16: each pair is added (or compared) in fp32, exactly, and the sum
// rounded to bf16 to nearest even: one rounding per ring step.
void reduce_into(bf16_t* dst, const bf16_t* a, const bf16_t* b, size_t count, ReduceOp op);

}  // namespace tessera::comm

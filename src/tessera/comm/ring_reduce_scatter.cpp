#include "tessera/comm/ring_reduce_scatter.h"

#include <algorithm>
#include <cstring>

namespace tessera::comm {

void reduce_into(float* dst, const float* a, const float* b, size_t count, ReduceOp op) {
  // Plain loops: at -O3 -march=native GCC vectorizes both (with a runtime
  // overlap check, since dst may alias an input).
  if (op == ReduceOp::Sum) {
    for (size_t i = 0; i < count; ++i) dst[i] = a[i] + b[i];
  } else {
    for (size_t i = 0; i < count; ++i) dst[i] = std::max(a[i], b[i]);
  }
}

void ring_reduce_scatter(MPI_Comm comm, const float* send, float* recv, size_t shard_count,
                         ReduceOp op, std::vector<float>& scratch) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const float* own = send + size_t(rank) * shard_count;
  if (size == 1) {
    if (recv != own) std::memmove(recv, own, shard_count * sizeof(float));
    return;
  }
  const int right = (rank + 1) % size;
  const int left = (rank + size - 1) % size;
  const auto block = [&](int b) { return send + size_t((b % size + size) % size) * shard_count; };

  // The running partial sum travels in `partial`. When recv is separate from
  // send, recv itself can hold it (it is overwritten by the final step
  // anyway); in place, recv is this rank's own input block, still needed at
  // the last step, so the partial lives in scratch.
  const bool in_place = recv == own;
  const size_t piece_max = std::min(kRingPieceElements, shard_count);
  scratch.resize(piece_max + (in_place && size > 2 ? shard_count : 0));
  float* incoming = scratch.data();
  float* partial = in_place ? scratch.data() + piece_max : recv;

  for (int step = 0; step < size - 1; ++step) {
    // Step 0 sends this rank's raw copy of block rank-1; later steps send the
    // partial built in the step before. The block arriving is rank-step-2.
    const float* outgoing = step == 0 ? block(rank - 1) : partial;
    const float* mine = block(rank - step - 2);
    float* result = step == size - 2 ? recv : partial;
    for (size_t off = 0; off < shard_count; off += piece_max) {
      const size_t n = std::min(piece_max, shard_count - off);
      MPI_Sendrecv(outgoing + off, int(n), MPI_FLOAT, right, 0, incoming, int(n), MPI_FLOAT, left,
                   0, comm, MPI_STATUS_IGNORE);
      // Safe even when result == outgoing: this piece has already been sent.
      reduce_into(result + off, incoming, mine + off, n, op);
    }
  }
}

}  // namespace tessera::comm

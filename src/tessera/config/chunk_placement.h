// Where each pipeline chunk lives: the one place chunk -> (rank, local chunk)
// is decided, for the schedules and simulator (parallel/schedule.h), the
// engine's layout (ParallelConfig::chunk_first_layer, model/param_layout)
// and executor, and the planner. Plain arithmetic on (p, chunk), so it sits
// with the configuration, below every layer that asks.
//
// The model is cut into p x v chunks of consecutive layers, global chunk g
// holding the layers after chunk g - 1's; activations flow g -> g + 1.
//   RoundRobin (every schedule but zbv): rank g % p, local chunk g / p.
//   V (zbv, v = 2): rank r holds global chunks r (local 0) and 2p-1-r
//     (local 1), so activations go down the ranks and back up: the last rank
//     runs chunks p-1 and p back to back (a same-rank hand-off, no message)
//     and rank 0 holds the first chunk (embedding) and the last (head, loss).
#pragma once
#include <cstdint>

namespace tessera {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved, ZeroBubbleH1, ZeroBubbleV };

// zb-h1 and zbv split each backward into an input pass (B) and a weight
// pass (W), run apart: the one test every layer that cares asks.
inline bool splits_backward(ScheduleKind kind) {
  return kind == ScheduleKind::ZeroBubbleH1 || kind == ScheduleKind::ZeroBubbleV;
}

enum class ChunkPlacement { RoundRobin, V };
inline ChunkPlacement chunk_placement(ScheduleKind kind) {
  return kind == ScheduleKind::ZeroBubbleV ? ChunkPlacement::V : ChunkPlacement::RoundRobin;
}
// Global chunk of `rank`'s local chunk `local`.
inline int64_t global_chunk(int64_t p, int64_t rank, int64_t local,
                            ChunkPlacement pl = ChunkPlacement::RoundRobin) {
  if (pl == ChunkPlacement::V) return local == 0 ? rank : 2 * p - 1 - rank;
  return local * p + rank;
}
// The pipeline rank holding global chunk `global`.
inline int64_t chunk_rank(int64_t p, int64_t global,
                          ChunkPlacement pl = ChunkPlacement::RoundRobin) {
  if (pl == ChunkPlacement::V) return global < p ? global : 2 * p - 1 - global;
  return global % p;
}
// Its local chunk index on that rank.
inline int64_t chunk_local(int64_t p, int64_t global,
                           ChunkPlacement pl = ChunkPlacement::RoundRobin) {
  if (pl == ChunkPlacement::V) return global < p ? 0 : 1;
  return global / p;
}

}  // namespace tessera

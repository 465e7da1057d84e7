// ZBV's order of compute actions (Qi et al. 2024, "Zero Bubble Pipeline
// Parallelism", arXiv:2401.10241, section 6 and "Pipeline Parallelism with
// Controllable Memory", arXiv:2405.15362): two chunks per rank in
// ChunkPlacement::V, backward split into BackwardInput (B) and
// BackwardWeight (W).
//
// The order comes from a greedy list scheduler run once with unit F, B, W
// on every rank at once; build_schedule (schedule.h) then adds the transfers
// round each compute action. Because the lists are the order of a run that
// finished, every dependency is met earlier in some list: the dataflow
// executor (and the simulator) cannot deadlock on them with any costs.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/parallel/schedule.h"

namespace tessera {

// ranks[r]: rank r's Forward / BackwardInput / BackwardWeight actions (local
// chunk 0 or 1, peer -1) in the order it runs them; p >= 2, m >= 1.
std::vector<std::vector<Action>> zbv_compute_order(int64_t p, int64_t m);

}  // namespace tessera

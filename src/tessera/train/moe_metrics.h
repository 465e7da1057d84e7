// The MoE part of a step's metrics (StepStats::moe_*, docs/moe.md), from
// the routing stats the step's forwards summed (MoeStepSums): this rank's
// MoE layers only (under pipelining, its stage's; under data parallelism,
// its own micro-batches').
#pragma once
#include <cstdint>

#include "tessera/model/activations.h"
#include "tessera/model/param_layout.h"
#include "tessera/train/step_stats.h"

namespace tessera {

// sums: `micro_batches` forwards' worth; layout: which global layer each
// rank layer is.
void moe_step_metrics(const MoeStepSums& sums, const ParamLayout& layout, int64_t micro_batches,
                      StepStats& s);

}  // namespace tessera

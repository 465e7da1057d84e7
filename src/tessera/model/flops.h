// FLOP counts: the one formula every report uses.
//
// Model FLOPs count the work the model needs (forward + backward = 3x the
// forward matmuls, attention scores and values over the full T x T as
// Megatron-LM counts them); hardware FLOPs add what activation recomputation
// executes again. MFU divides model FLOPs by a peak; HFU uses hardware FLOPs.
#pragma once
#include <cstdint>

#include "tessera/config/gpt_config.h"
#include "tessera/config/parallel_config.h"

namespace tessera {

struct FlopCount {
  double model = 0;     // FLOPs of forward + backward
  double hardware = 0;  // model FLOPs plus recomputation
};

// Forward FLOPs of one transformer layer over one sequence of `seq` tokens.
double layer_forward_flops(const GPTConfig& m, int64_t seq);
// Forward FLOPs of the LM head (logits) over one sequence.
double head_forward_flops(const GPTConfig& m, int64_t seq);

// FLOPs of one optimizer step over `sequences` sequences of m.seq_length tokens.
// Under zb-h1 and zbv (`schedule`) the recomputed part runs twice: before the input
// pass and again before the weight pass.
FlopCount step_flops(const GPTConfig& m, int64_t sequences, Recompute recompute,
                     ScheduleKind schedule = ScheduleKind::OneFOneB);

}  // namespace tessera

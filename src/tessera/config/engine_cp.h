// What the engine's context parallelism runs: one rule, read by `tessera
// train` (TrainConfig::validate refuses the rest) and by the planner's
// searches of the engine's own runs (plan --config, tessera tune), so tune
// never launches a cp layout train refuses.
#pragma once
#include "tessera/config/gpt_config.h"
#include "tessera/config/parallel_config.h"

namespace tessera {

// For cp > 1, the setting the engine's context parallelism is not combined
// with yet ("--num-experts (MoE layers)", ...), else nullptr. The planner's model
// of Megatron-style runs prices them all.
const char* cp_unsupported_in_engine(const ParallelConfig& p, const GPTConfig& model);

}  // namespace tessera

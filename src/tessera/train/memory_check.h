// Refusing a run that cannot fit in memory before anything is allocated: a
// huge --hidden-size or --num-layers otherwise ends in std::bad_alloc, or in
// the kernel killing the process while the buffers are zeroed.
#pragma once
#include <cstdint>

#include "tessera/parallel/memory_bytes.h"
#include "tessera/train/train_config.h"

namespace tessera {

// Bytes the rank at (tp_rank, pp_rank) will certainly hold: its parameters,
// gradients and AdamW state under the run's ZeRO stage (from its
// ParamLayout, as DataParallel allocates them), the bf16 / fp16 working copy,
// and one micro-batch's activations. A lower bound (the pipeline keeps more
// micro-batches in flight, ZeRO-3 gathers units), so that a run it refuses
// can never have fitted.
MemoryBytes rank_memory_lower_bound(const TrainConfig& c, int64_t tp_rank, int64_t pp_rank);

// Throws tessera::Error "needs N GB per rank (...) but M GB are available"
// when need exceeds available_bytes / ranks_on_node. available_bytes <= 0
// means unknown: no check.
void check_memory_fits(const MemoryBytes& need, double available_bytes, int64_t ranks_on_node);

}  // namespace tessera

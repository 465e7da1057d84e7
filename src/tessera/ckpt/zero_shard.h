// A data-parallel rank's share of a checkpoint, under any ZeRO stage: what
// it writes (its ranges of the flat parameter and AdamW buffers) and how it
// loads a checkpoint written by any layout into them. Lives in ckpt/ so
// that parallel/ knows nothing of the file format.
#pragma once
#include <cstdint>

#include "tessera/ckpt/checkpoint.h"
#include "tessera/parallel/data_parallel.h"

namespace tessera::ckpt {

// ZeRO-3: the rank's parameter shard; below, dp rank 0 writes the whole
// (replicated) parameters. Moments: the rank's optimizer segments (stage >= 1)
// or dp rank 0's whole copy (stage 0).
ShardView zero_shard_view(DataParallel& dp, int64_t tp_rank, int64_t pp_rank);

// Fill the rank's parameters (or ZeRO-3 shard) and, with_optimizer, its
// moments from ck (without: the moments are left as they are, a fresh
// trainer's zeros).
void load_zero_shard(const Checkpoint& ck, DataParallel& dp, bool with_optimizer = true);

}  // namespace tessera::ckpt

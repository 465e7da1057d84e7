// ParallelConfig: the parallel degrees and batch geometry of a run, validated
// in one place before any rank allocates.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/config/gpt_config.h"

namespace tessera {

enum class Recompute { None, Selective, Full };

// --recompute-granularity none|selective|full; throws naming the flag.
Recompute recompute_parse(std::string_view name);
const char* recompute_name(Recompute r);

enum class ScheduleKind { GPipe, OneFOneB, Interleaved };

// CLI values of --pipeline-schedule: gpipe | 1f1b | interleaved.
ScheduleKind schedule_kind_parse(std::string_view s);
const char* schedule_kind_name(ScheduleKind k);

struct ParallelConfig {
  int64_t tp = 1;                  // --tensor-model-parallel-size
  int64_t pp = 1;                  // --pipeline-model-parallel-size
  int64_t dp = 1;                  // world / (tp * pp)
  int64_t virtual_stages = 1;      // --virtual-pipeline-stages
  int64_t micro_batch = 1;         // --micro-batch-size (sequences per micro-batch per dp rank)
  int64_t global_batch = 1;        // --global-batch-size (sequences per optimizer step)
  int zero_stage = 0;              // --zero-stage
  Recompute recompute = Recompute::None;
  bool sequence_parallel = false;  // --sequence-parallel

  // Micro-batches each dp rank runs per step (gradient accumulation steps).
  int64_t accumulation_steps() const { return global_batch / (micro_batch * dp); }

  // Throws tessera::Error naming the flag(s) of the first impossible setting.
  // world: number of ranks the job was launched with.
  void validate(const GPTConfig& model, int64_t world) const;
  std::string summary() const;
};

}  // namespace tessera

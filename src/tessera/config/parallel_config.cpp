#include "tessera/config/parallel_config.h"

#include <fmt/format.h>

#include "tessera/core/error.h"

namespace tessera {

Recompute recompute_parse(std::string_view name) {
  if (name == "none") return Recompute::None;
  if (name == "selective") return Recompute::Selective;
  if (name == "full") return Recompute::Full;
  fail("--recompute-granularity: '{}' is not one of none, selective, full", name);
}

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::None: return "none";
    case Recompute::Selective: return "selective";
    case Recompute::Full: return "full";
  }
  return "?";
}

ScheduleKind schedule_kind_parse(std::string_view s) {
  if (s == "gpipe") return ScheduleKind::GPipe;
  if (s == "1f1b") return ScheduleKind::OneFOneB;
  if (s == "interleaved") return ScheduleKind::Interleaved;
  fail("--pipeline-schedule must be gpipe, 1f1b or interleaved (got '{}')", s);
}

const char* schedule_kind_name(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::GPipe: return "gpipe";
    case ScheduleKind::OneFOneB: return "1f1b";
    case ScheduleKind::Interleaved: return "interleaved";
  }
  return "?";
}

void ParallelConfig::validate(const GPTConfig& m, int64_t world) const {
  TESSERA_CHECK(tp >= 1, "--tensor-model-parallel-size must be >= 1 (got {})", tp);
  TESSERA_CHECK(pp >= 1, "--pipeline-model-parallel-size must be >= 1 (got {})", pp);
  TESSERA_CHECK(world % (tp * pp) == 0 && dp * tp * pp == world,
                "world size {} is not --tensor-model-parallel-size ({}) x "
                "--pipeline-model-parallel-size ({}) x data-parallel size",
                world, tp, pp);
  TESSERA_CHECK(micro_batch >= 1, "--micro-batch-size must be >= 1 (got {})", micro_batch);
  TESSERA_CHECK(global_batch >= 1, "--global-batch-size must be >= 1 (got {})", global_batch);
  TESSERA_CHECK(global_batch % (micro_batch * dp) == 0,
                "--global-batch-size ({}) must be divisible by --micro-batch-size ({}) x "
                "data-parallel size ({})",
                global_batch, micro_batch, dp);
  TESSERA_CHECK(zero_stage >= 0 && zero_stage <= 3, "--zero-stage must be 0, 1, 2 or 3 (got {})",
                zero_stage);
  TESSERA_CHECK(m.num_heads % tp == 0,
                "--num-attention-heads ({}) must be divisible by --tensor-model-parallel-size ({})",
                m.num_heads, tp);
  TESSERA_CHECK(m.hidden_size % tp == 0,
                "--hidden-size ({}) must be divisible by --tensor-model-parallel-size ({})",
                m.hidden_size, tp);
  TESSERA_CHECK(m.ffn() % tp == 0,
                "--ffn-hidden-size ({}) must be divisible by --tensor-model-parallel-size ({})",
                m.ffn(), tp);
  TESSERA_CHECK(!sequence_parallel || m.seq_length % tp == 0,
                "--seq-length ({}) must be divisible by --tensor-model-parallel-size ({}) with "
                "--sequence-parallel",
                m.seq_length, tp);
  TESSERA_CHECK(virtual_stages >= 1, "--virtual-pipeline-stages must be >= 1 (got {})",
                virtual_stages);
  TESSERA_CHECK(m.num_layers % (pp * virtual_stages) == 0,
                "--num-layers ({}) must be divisible by --pipeline-model-parallel-size ({}) x "
                "--virtual-pipeline-stages ({})",
                m.num_layers, pp, virtual_stages);
}

std::string ParallelConfig::summary() const {
  return fmt::format("tp {}{} pp {} dp {} | micro-batch {} global batch {} ({} accumulation steps) | "
                     "zero {} | recompute {}",
                     tp, sequence_parallel ? " (sequence parallel)" : "", pp, dp, micro_batch,
                     global_batch, accumulation_steps(), zero_stage, recompute_name(recompute));
}

}  // namespace tessera

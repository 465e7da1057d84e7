#include "tessera/config/parallel_config.h"

#include <fmt/format.h>

#include "tessera/core/checked_math.h"
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

void schedule_validate(ScheduleKind kind, int64_t p, int64_t v, int64_t m) {
  TESSERA_CHECK(p >= 1, "--pipeline-model-parallel-size must be >= 1 (got {})", p);
  TESSERA_CHECK(v >= 1, "--virtual-pipeline-stages must be >= 1 (got {})", v);
  TESSERA_CHECK(m >= 1,
                "micro-batches per step, global batch / (micro-batch x dp), must be >= 1 (got {})",
                m);
  TESSERA_CHECK(v == 1 || kind == ScheduleKind::Interleaved,
                "--virtual-pipeline-stages {} needs --pipeline-schedule interleaved (got {})", v,
                schedule_kind_name(kind));
  // With one rank every chunk boundary would be a send to itself; run v = 1.
  TESSERA_CHECK(v == 1 || p >= 2,
                "--virtual-pipeline-stages {} needs --pipeline-model-parallel-size >= 2 (got {})",
                v, p);
  TESSERA_CHECK(kind != ScheduleKind::Interleaved || m % p == 0,
                "--pipeline-schedule interleaved needs the micro-batches per step, global batch / "
                "(micro-batch x dp) = {}, to be a multiple of --pipeline-model-parallel-size ({})",
                m, p);
}

namespace {

// tp, pp >= 1 and world a multiple of tp x pp.
void validate_world(int64_t tp, int64_t pp, int64_t world) {
  TESSERA_CHECK(tp >= 1, "--tensor-model-parallel-size must be >= 1 (got {})", tp);
  TESSERA_CHECK(pp >= 1, "--pipeline-model-parallel-size must be >= 1 (got {})", pp);
  TESSERA_CHECK(world >= 1, "world size must be >= 1 (got {})", world);
  const int64_t model_ranks =
      checked_mul(tp, pp, "--tensor-model-parallel-size x --pipeline-model-parallel-size");
  TESSERA_CHECK(world % model_ranks == 0,
                "world size {} is not divisible by --tensor-model-parallel-size ({}) x "
                "--pipeline-model-parallel-size ({}): data-parallel size = world / (tp x pp) "
                "must be a whole number",
                world, tp, pp);
}

}  // namespace

void ParallelConfig::set_world(int64_t world) {
  validate_world(tp, pp, world);
  dp = world / (tp * pp);
}

void ParallelConfig::validate_degrees(int64_t world) const {
  validate_world(tp, pp, world);
  TESSERA_CHECK(dp >= 1 && dp == world / (tp * pp),
                "data-parallel size {} is not world size {} / (--tensor-model-parallel-size ({}) "
                "x --pipeline-model-parallel-size ({}))",
                dp, world, tp, pp);
}

namespace {

// The model's dimensions split over tp, its layers over pp x v.
void validate_model_split(const ParallelConfig& p, const GPTConfig& m) {
  TESSERA_CHECK(m.num_heads % p.tp == 0,
                "--num-attention-heads ({}) must be divisible by --tensor-model-parallel-size ({})",
                m.num_heads, p.tp);
  TESSERA_CHECK(m.hidden_size % p.tp == 0,
                "--hidden-size ({}) must be divisible by --tensor-model-parallel-size ({})",
                m.hidden_size, p.tp);
  TESSERA_CHECK(m.ffn() % p.tp == 0,
                "--ffn-hidden-size ({}) must be divisible by --tensor-model-parallel-size ({})",
                m.ffn(), p.tp);
  TESSERA_CHECK(!p.sequence_parallel || m.seq_length % p.tp == 0,
                "--seq-length ({}) must be divisible by --tensor-model-parallel-size ({}) with "
                "--sequence-parallel",
                m.seq_length, p.tp);
  TESSERA_CHECK(p.virtual_stages >= 1, "--virtual-pipeline-stages must be >= 1 (got {})",
                p.virtual_stages);
  TESSERA_CHECK(m.num_layers % checked_mul(p.pp, p.virtual_stages,
                                           "--pipeline-model-parallel-size x "
                                           "--virtual-pipeline-stages") ==
                    0,
                "--num-layers ({}) must be divisible by --pipeline-model-parallel-size ({}) x "
                "--virtual-pipeline-stages ({})",
                m.num_layers, p.pp, p.virtual_stages);
}

}  // namespace

void ParallelConfig::validate(const GPTConfig& m, int64_t world) const {
  validate_degrees(world);
  TESSERA_CHECK(micro_batch >= 1, "--micro-batch-size must be >= 1 (got {})", micro_batch);
  TESSERA_CHECK(global_batch >= 1, "--global-batch-size must be >= 1 (got {})", global_batch);
  const int64_t per_step =
      checked_mul(micro_batch, dp, "--micro-batch-size x data-parallel size");
  TESSERA_CHECK(global_batch % per_step == 0,
                "--global-batch-size ({}) must be divisible by --micro-batch-size ({}) x "
                "data-parallel size ({})",
                global_batch, micro_batch, dp);
  TESSERA_CHECK(zero_stage >= 0 && zero_stage <= 3, "--zero-stage must be 0, 1, 2 or 3 (got {})",
                zero_stage);
  // The embedding table is padded to a multiple of this (GPTConfig::padded_vocab).
  checked_add(m.vocab_size,
              checked_mul(m.make_vocab_size_divisible_by, tp,
                          "--make-vocab-size-divisible-by x --tensor-model-parallel-size"),
              "vocabulary padded to --make-vocab-size-divisible-by x --tensor-model-parallel-size");
  validate_model_split(*this, m);
  if (pp > 1) {
    schedule_validate(schedule, pp, virtual_stages, accumulation_steps());
  } else {
    TESSERA_CHECK(virtual_stages == 1 && schedule != ScheduleKind::Interleaved,
                  "--virtual-pipeline-stages / --pipeline-schedule interleaved need "
                  "--pipeline-model-parallel-size > 1");
  }
}

std::string ParallelConfig::summary() const {
  return fmt::format("tp {}{} pp {} dp {} | micro-batch {} global batch {} ({} accumulation steps) | "
                     "zero {} | recompute {}",
                     tp, sequence_parallel ? " (sequence parallel)" : "", pp, dp, micro_batch,
                     global_batch, accumulation_steps(), zero_stage, recompute_name(recompute));
}

}  // namespace tessera

#include "tessera/config/parallel_fields.h"

#include <array>
#include <limits>

namespace tessera {

namespace {

using P = ParallelConfig;
constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();
constexpr FieldRange kPositive{1, kNoMax, ">= 1"};

bool context_parallel(const P& p) { return p.cp > 1; }
bool expert_parallel(const P& p) { return p.ep > 1; }

const std::array<Field<P>, 16> kFields{{
    {flag::tp, "tp", kSurfaceLayout | kSurfaceCheckpoint | kSurfaceTrial, &P::tp,
     "tensor-parallel ranks", kPositive},
    {flag::pp, "pp", kSurfaceLayout | kSurfaceCheckpoint | kSurfaceTrial, &P::pp, "pipeline stages",
     kPositive},
    // Context parallelism: written (a planned layout's keys, metadata, a
    // metrics header, a trial line) only where cp > 1, so every file of a
    // run without it reads as it did before the engine ran cp; absent, it
    // reads as cp 1 (tune's trial reader fills it in for old logs).
    {flag::cp, "cp", kSurfaceLayout | kSurfaceCheckpoint | kSurfaceTrial, &P::cp,
     "context-parallel ranks: each holds 1/cp of every sequence (2 x cp chunks, load-balanced "
     "for causal attention)",
     kPositive, context_parallel, context_parallel},
    {flag::cp_comm, "cp_comm", kSurfaceLayout | kSurfaceCheckpoint | kSurfaceTrial,
     ChoiceAccess<P>{[](const P& p) { return cp_comm_name(p.cp_comm); },
                     [](P& p, std::string_view v) { p.cp_comm = cp_comm_parse(v); }},
     "context parallelism's K/V exchange: p2p (a ring, overlapped with attention) or "
     "all_gather",
     std::nullopt, context_parallel, context_parallel},
    // Expert parallelism: each rank holds its E / ep experts (ParamLayout),
    // so it is a layout key, a trial key (the engine search and tune try
    // it: plan::ep_in_engine_trials) and checkpoint metadata (informative:
    // a checkpoint reshards across ep as across tp). Written only where
    // ep > 1, as cp: files of runs without it read as before.
    {flag::ep, "ep", kSurfaceLayout | kSurfaceCheckpoint | kSurfaceTrial, &P::ep,
     "expert-parallel ranks: each holds num-experts / ep of every MoE layer's experts (carved "
     "out of the data-parallel x context-parallel ranks)",
     kPositive, expert_parallel, expert_parallel},
    // With ep > 1 a layout key (two runs that differ only here are two
    // layouts: `plan --validate` pools repeats by layout) and checkpoint
    // metadata (informative), written only there, as ep. Not a trial key:
    // tune tries the default dispatcher only.
    {flag::moe_dispatcher, "moe_token_dispatcher_type", kSurfaceLayout | kSurfaceCheckpoint,
     ChoiceAccess<P>{[](const P& p) { return moe_dispatcher_name(p.moe_dispatcher); },
                     [](P& p, std::string_view v) { p.moe_dispatcher = moe_dispatcher_parse(v); }},
     "how expert parallelism moves tokens to their experts: alltoall or allgather",
     std::nullopt, expert_parallel, expert_parallel},
    {flag::micro_batch, "micro_batch", kSurfaceLayout | kSurfaceCheckpoint | kSurfaceTrial,
     &P::micro_batch, "sequences per micro-batch", kPositive},
    {flag::global_batch, "global_batch", kSurfaceLayout | kSurfaceCheckpoint | kSurfaceTrial,
     &P::global_batch, "sequences per optimizer step (micro-batch x accumulation steps x dp)",
     kPositive},
    {flag::zero_stage, "zero_stage", kSurfaceLayout | kSurfaceCheckpoint | kSurfaceTrial,
     &P::zero_stage,
     "ZeRO: 0 replicate, 1 shard optimizer state, 2 and gradients, 3 and parameters",
     FieldRange{0, 3, "0, 1, 2 or 3"}},
    {flag::recompute, "recompute", kSurfaceLayout | kSurfaceCheckpoint | kSurfaceTrial,
     ChoiceAccess<P>{[](const P& p) { return recompute_name(p.recompute); },
                     [](P& p, std::string_view v) { p.recompute = recompute_parse(v); }},
     "activation recomputation: none, selective (attention core and GELU) or full (each layer "
     "from its input)"},
    {flag::sequence_parallel, "sequence_parallel",
     kSurfaceLayout | kSurfaceCheckpoint | kSurfaceTrial, &P::sequence_parallel,
     "split LayerNorm/residual regions along the sequence over the tp ranks"},
    {flag::schedule, "schedule", kSurfaceLayout | kSurfaceCheckpoint | kSurfaceTrial,
     ChoiceAccess<P>{[](const P& p) { return schedule_kind_name(p.schedule); },
                     [](P& p, std::string_view v) { p.schedule = schedule_kind_parse(v); }},
     "gpipe, 1f1b, interleaved, zb-h1 or zbv"},
    // Only the interleaved and zbv schedules have virtual stages (validate
    // refuses v > 1 with another), so a planned layout names them only there.
    {flag::virtual_stages, "virtual_stages", kSurfaceLayout | kSurfaceCheckpoint | kSurfaceTrial,
     &P::virtual_stages, "model chunks per pipeline rank (interleaved schedule; zbv: 2)",
     kPositive,
     [](const P& p) {
       return p.schedule == ScheduleKind::Interleaved || p.schedule == ScheduleKind::ZeroBubbleV;
     }},
    {flag::first_stage_layers, "first_stage_layers",
     kSurfaceLayout | kSurfaceCheckpoint | kSurfaceTrial, &P::first_stage_layers,
     "transformer layers of the first pipeline stage; the stages without such a flag split the "
     "rest evenly (default: every stage num-layers / pp)",
     kPositive},
    {flag::last_stage_layers, "last_stage_layers",
     kSurfaceLayout | kSurfaceCheckpoint | kSurfaceTrial, &P::last_stage_layers,
     "transformer layers of the last pipeline stage (it also holds the LM head and loss)",
     kPositive},
    {nullptr, "dp", kSurfaceCheckpoint | kSurfaceTrial, &P::dp, "data-parallel ranks"},
}};

}  // namespace

std::span<const Field<ParallelConfig>> parallel_fields() { return kFields; }

const Field<ParallelConfig>& parallel_field(std::string_view flag) {
  return field_of(parallel_fields(), flag, "ParallelConfig");
}

void check_parallel_range(const char* flag, int64_t v) { check_field_range(parallel_field(flag), v); }

}  // namespace tessera

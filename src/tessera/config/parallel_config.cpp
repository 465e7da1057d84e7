#include "tessera/config/parallel_config.h"

#include <utility>

#include <fmt/format.h>

#include "tessera/config/model_fields.h"
#include "tessera/core/checked_math.h"
#include "tessera/config/parallel_fields.h"
#include "tessera/core/error.h"

namespace tessera {

Recompute recompute_parse(std::string_view name) {
  if (name == "none") return Recompute::None;
  if (name == "selective") return Recompute::Selective;
  if (name == "full") return Recompute::Full;
  fail("{}: '{}' is not one of none, selective, full", flag::recompute, name);
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
  if (s == "zb-h1") return ScheduleKind::ZeroBubbleH1;
  if (s == "zbv") return ScheduleKind::ZeroBubbleV;
  fail("{} must be gpipe, 1f1b, interleaved, zb-h1 or zbv (got '{}')", flag::schedule, s);
}

const char* schedule_kind_name(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::GPipe: return "gpipe";
    case ScheduleKind::OneFOneB: return "1f1b";
    case ScheduleKind::Interleaved: return "interleaved";
    case ScheduleKind::ZeroBubbleH1: return "zb-h1";
    case ScheduleKind::ZeroBubbleV: return "zbv";
  }
  return "?";
}

CpCommType cp_comm_parse(std::string_view s) {
  if (s == "p2p") return CpCommType::P2p;
  if (s == "all_gather") return CpCommType::AllGather;
  fail("{} must be p2p or all_gather (got '{}')", flag::cp_comm, s);
}

const char* cp_comm_name(CpCommType t) {
  return t == CpCommType::P2p ? "p2p" : "all_gather";
}

MoeDispatcher moe_dispatcher_parse(std::string_view s) {
  if (s == "alltoall") return MoeDispatcher::AllToAll;
  if (s == "allgather") return MoeDispatcher::AllGather;
  fail("{} must be alltoall or allgather (got '{}')", flag::moe_dispatcher, s);
}

const char* moe_dispatcher_name(MoeDispatcher d) {
  return d == MoeDispatcher::AllToAll ? "alltoall" : "allgather";
}

void schedule_validate(ScheduleKind kind, int64_t p, int64_t v, int64_t m) {
  check_parallel_range(flag::pp, p);
  check_parallel_range(flag::virtual_stages, v);
  TESSERA_CHECK(m >= 1,
                "micro-batches per step, global batch / (micro-batch x dp), must be >= 1 (got {})",
                m);
  // ZBV's V places exactly two chunks on each rank (parallel/schedule.h).
  TESSERA_CHECK(kind != ScheduleKind::ZeroBubbleV || v == 2, "{} zbv needs {} 2 (got {})",
                flag::schedule, flag::virtual_stages, v);
  TESSERA_CHECK(v == 1 || kind == ScheduleKind::Interleaved || kind == ScheduleKind::ZeroBubbleV,
                "{} {} needs {} interleaved (got {})", flag::virtual_stages, v, flag::schedule,
                schedule_kind_name(kind));
  // With one rank every chunk boundary would be a send to itself; run v = 1.
  TESSERA_CHECK(v == 1 || p >= 2, "{} {} needs {} >= 2 (got {})", flag::virtual_stages, v,
                flag::pp, p);
  TESSERA_CHECK(kind != ScheduleKind::Interleaved || m % p == 0,
                "{} interleaved needs the micro-batches per step, global batch / (micro-batch x "
                "dp) = {}, to be a multiple of {} ({})",
                flag::schedule, m, flag::pp, p);
  // With one stage there is no bubble to fill, and the executor would run a
  // split backward for nothing.
  TESSERA_CHECK(kind != ScheduleKind::ZeroBubbleH1 || p >= 2, "{} zb-h1 needs {} >= 2 (got {})",
                flag::schedule, flag::pp, p);
  TESSERA_CHECK(kind != ScheduleKind::ZeroBubbleV || p >= 2, "{} zbv needs {} >= 2 (got {})",
                flag::schedule, flag::pp, p);
}

namespace {

// tp, cp, pp, ep >= 1, world a multiple of tp x cp x pp, and ep a divisor
// of the dp x cp ranks that leaves.
void validate_world(int64_t tp, int64_t cp, int64_t pp, int64_t ep, int64_t world) {
  check_parallel_range(flag::tp, tp);
  check_parallel_range(flag::cp, cp);
  check_parallel_range(flag::pp, pp);
  TESSERA_CHECK(world >= 1, "world size must be >= 1 (got {})", world);
  static const std::string what = fmt::format("{} x {} x {}", flag::tp, flag::cp, flag::pp);
  const int64_t model_ranks = checked_mul(checked_mul(tp, cp, what.c_str()), pp, what.c_str());
  if (cp == 1)  // the message of every run without context parallelism
    TESSERA_CHECK(world % model_ranks == 0,
                  "world size {} is not divisible by {} ({}) x {} ({}): data-parallel size = "
                  "world / (tp x pp) must be a whole number",
                  world, flag::tp, tp, flag::pp, pp);
  TESSERA_CHECK(world % model_ranks == 0,
                "world size {} is not divisible by {} ({}) x {} ({}) x {} ({}): data-parallel "
                "size = world / (tp x cp x pp) must be a whole number",
                world, flag::tp, tp, flag::cp, cp, flag::pp, pp);
  // The expert-parallel group is carved out of the dp x cp ranks, so ep
  // must divide them: equivalently, ep x tp x cp x pp divides the world.
  check_parallel_range(flag::ep, ep);
  const int64_t dense_ranks = world / (tp * cp * pp) * cp;  // dp x cp
  TESSERA_CHECK(dense_ranks % ep == 0,
                "{} ({}) x {} ({}) x {} ({}) must divide the world size {}: expert-parallel "
                "ranks are carved out of the data-parallel x context-parallel ranks ({} here)",
                flag::ep, ep, flag::tp, tp, flag::pp, pp, world, dense_ranks);
}

}  // namespace

void ParallelConfig::set_world(int64_t world) {
  validate_world(tp, cp, pp, ep, world);
  dp = world / (tp * cp * pp);
}

void ParallelConfig::validate_degrees(int64_t world) const {
  validate_world(tp, cp, pp, ep, world);
  TESSERA_CHECK(dp >= 1 && dp == world / (tp * cp * pp),
                "data-parallel size {} is not world size {} / ({} ({}) x {} ({}) x {} ({}))", dp,
                world, flag::tp, tp, flag::cp, cp, flag::pp, pp);
}

namespace {

constexpr const char* kFirstFlag = flag::first_stage_layers;
constexpr const char* kLastFlag = flag::last_stage_layers;

// Megatron-Core's uneven split: the first and/or last stage hold the layers
// given, the middle stages (those without a flag) an equal share of the
// rest, every stage at least one layer, and with v virtual stages every
// stage's count a multiple of v (its chunks are equal).
void validate_uneven_split(const ParallelConfig& p, int64_t num_layers) {
  const char* which = p.first_stage_layers ? kFirstFlag : kLastFlag;
  const std::pair<const char*, std::optional<int64_t>> given[] = {
      {kFirstFlag, p.first_stage_layers}, {kLastFlag, p.last_stage_layers}};
  for (const auto& [name, value] : given)
    if (value) check_parallel_range(name, *value);
  TESSERA_CHECK(p.pp > 1, "{} needs {} > 1 (got {})", which, flag::pp, p.pp);
  int64_t rest = num_layers, middle = p.pp;
  for (const auto& [name, value] : given) {
    if (!value) continue;
    TESSERA_CHECK(*value <= num_layers, "{} ({}) is more than {} ({})", name, *value,
                  flag::num_layers, num_layers);
    TESSERA_CHECK(*value % p.virtual_stages == 0,
                  "{} ({}) must be divisible by {} ({}): each stage's layers are cut into that "
                  "many equal chunks",
                  name, *value, flag::virtual_stages, p.virtual_stages);
    rest -= *value;
    middle -= 1;
  }
  if (middle == 0) {
    TESSERA_CHECK(rest == 0,
                  "{} ({}) + {} ({}) must equal {} ({}) with {} 2", kFirstFlag,
                  *p.first_stage_layers, kLastFlag, *p.last_stage_layers, flag::num_layers,
                  num_layers, flag::pp);
    return;
  }
  const std::string flags = p.first_stage_layers && p.last_stage_layers
                                ? fmt::format("{} + {}", kFirstFlag, kLastFlag)
                                : std::string(which);
  TESSERA_CHECK(rest >= middle,
                "{} take {} layers and {} is {}: the {} other pipeline stage(s) need at least one "
                "layer each",
                flags, num_layers - rest, flag::num_layers, num_layers, middle);
  TESSERA_CHECK(rest % middle == 0,
                "{} ({}) less {} leaves {} layers, not divisible by the {} other pipeline "
                "stage(s)",
                flag::num_layers, num_layers, flags, rest, middle);
  TESSERA_CHECK((rest / middle) % p.virtual_stages == 0,
                "the {} layers of each middle pipeline stage ({} {} less {}, over {} stages) must "
                "be divisible by {} ({})",
                rest / middle, flag::num_layers, num_layers, flags, middle, flag::virtual_stages,
                p.virtual_stages);
}

// The model's dimensions split over tp, its layers over pp x v.
void validate_model_split(const ParallelConfig& p, const GPTConfig& m) {
  TESSERA_CHECK(m.num_heads % p.tp == 0, "{} ({}) must be divisible by {} ({})", flag::num_heads,
                m.num_heads, flag::tp, p.tp);
  TESSERA_CHECK(m.hidden_size % p.tp == 0, "{} ({}) must be divisible by {} ({})",
                flag::hidden_size, m.hidden_size, flag::tp, p.tp);
  // GQA: every tp rank holds whole key/value heads (num_query_groups / tp
  // of them) beside its num_heads / tp query heads.
  TESSERA_CHECK(m.kv_heads() % p.tp == 0, "{} ({}) must be divisible by {} ({})",
                flag::num_query_groups, m.kv_heads(), flag::tp, p.tp);
  static const std::string swiglu_default =
      fmt::format(", the {} default 8/3 x hidden", flag::swiglu);
  TESSERA_CHECK(m.ffn() % p.tp == 0, "{} ({}{}) must be divisible by {} ({})",
                flag::ffn_hidden_size, m.ffn(),
                m.swiglu && m.ffn_hidden_size == 0 ? swiglu_default : std::string(), flag::tp,
                p.tp);
  // MoE under tp: the shared expert splits over tp as the dense MLP (the
  // routed experts are the dense MLP's width, checked above).
  TESSERA_CHECK(!m.moe_shared() || m.moe_shared_expert_intermediate_size % p.tp == 0,
                "{} ({}) must be divisible by {} ({})", flag::moe_shared_size,
                m.moe_shared_expert_intermediate_size, flag::tp, p.tp);
  TESSERA_CHECK(!p.sequence_parallel || m.seq_length % p.tp == 0,
                "{} ({}) must be divisible by {} ({}) with {}", flag::seq_length, m.seq_length,
                flag::tp, p.tp, flag::sequence_parallel);
  // Context parallelism cuts every sequence into 2 x cp equal chunks
  // (kernels/context_chunks.h); cp = 1 holds the sequence whole.
  TESSERA_CHECK(p.cp == 1 || m.seq_length % (2 * p.cp) == 0,
                "{} ({}) must be divisible into 2 x {} ({}) = {} equal chunks", flag::seq_length,
                m.seq_length, flag::cp, p.cp, 2 * p.cp);
  // With both, SP splits a cp rank's T / cp rows over tp.
  TESSERA_CHECK(!p.sequence_parallel || p.cp == 1 || (m.seq_length / p.cp) % p.tp == 0,
                "{} ({}) must be divisible by {} ({}) x {} ({}) with {}", flag::seq_length,
                m.seq_length, flag::tp, p.tp, flag::cp, p.cp, flag::sequence_parallel);
  TESSERA_CHECK(p.ep == 1 || m.moe(), "{} {} needs an MoE model ({})", flag::ep, p.ep,
                flag::num_experts);
  TESSERA_CHECK(m.num_experts % p.ep == 0,
                "{} ({}) must be divisible by {} ({}): each expert-parallel rank holds the same "
                "number of experts",
                flag::num_experts, m.num_experts, flag::ep, p.ep);
  check_parallel_range(flag::virtual_stages, p.virtual_stages);
  if (p.uneven_stages()) return validate_uneven_split(p, m.num_layers);
  static const std::string what = fmt::format("{} x {}", flag::pp, flag::virtual_stages);
  const int64_t chunks = checked_mul(p.pp, p.virtual_stages, what.c_str());
  TESSERA_CHECK(m.num_layers % chunks == 0,
                "{} ({}) must be divisible by {} ({}) x {} ({})", flag::num_layers, m.num_layers,
                flag::pp, p.pp, flag::virtual_stages, p.virtual_stages);
}

}  // namespace

void ParallelConfig::validate(const GPTConfig& m, int64_t world) const {
  validate_degrees(world);
  check_parallel_range(flag::micro_batch, micro_batch);
  check_parallel_range(flag::global_batch, global_batch);
  static const std::string per_step_what = fmt::format("{} x data-parallel size", flag::micro_batch);
  const int64_t per_step = checked_mul(micro_batch, dp, per_step_what.c_str());
  TESSERA_CHECK(global_batch % per_step == 0,
                "{} ({}) must be divisible by {} ({}) x data-parallel size ({})",
                flag::global_batch, global_batch, flag::micro_batch, micro_batch, dp);
  check_parallel_range(flag::zero_stage, zero_stage);
  // The embedding table is padded to a multiple of this (GPTConfig::padded_vocab).
  static const std::string padding = fmt::format("{} x {}", flag::vocab_divisor, flag::tp);
  static const std::string padded = "vocabulary padded to " + padding;
  checked_add(m.vocab_size, checked_mul(m.make_vocab_size_divisible_by, tp, padding.c_str()),
              padded.c_str());
  validate_model_split(*this, m);
  if (pp > 1) {
    schedule_validate(schedule, pp, virtual_stages, accumulation_steps());
  } else {
    TESSERA_CHECK(virtual_stages == 1 && schedule != ScheduleKind::Interleaved,
                  "{} / {} interleaved need {} > 1", flag::virtual_stages, flag::schedule,
                  flag::pp);
    schedule_validate(schedule, 1, 1, accumulation_steps());  // zb-h1 names the flags

  }
}

std::string ParallelConfig::summary() const {
  std::string uneven;
  if (first_stage_layers) uneven += fmt::format(" first {}", *first_stage_layers);
  if (last_stage_layers) uneven += fmt::format(" last {}", *last_stage_layers);
  std::string context =
      cp > 1 ? fmt::format(" cp {} ({})", cp, cp_comm_name(cp_comm)) : std::string();
  if (ep > 1) context += fmt::format(" ep {} ({})", ep, moe_dispatcher_name(moe_dispatcher));
  return fmt::format("tp {}{}{} pp {}{} dp {} | micro-batch {} global batch {} ({} accumulation "
                     "steps) | zero {} | recompute {}",
                     tp, sequence_parallel ? " (sequence parallel)" : "", context, pp,
                     uneven.empty() ? "" : " (layers" + uneven + ")", dp, micro_batch,
                     global_batch, accumulation_steps(), zero_stage, recompute_name(recompute));
}

int64_t ParallelConfig::stage_layer_count(int64_t num_layers, int64_t stage) const {
  if (stage == 0 && first_stage_layers) return *first_stage_layers;
  if (stage == pp - 1 && last_stage_layers) return *last_stage_layers;
  if (!uneven_stages()) return num_layers / pp;
  // A middle stage: what the flagged ends leave, shared equally.
  const int64_t middle = pp - (first_stage_layers ? 1 : 0) - (last_stage_layers ? 1 : 0);
  return (num_layers - first_stage_layers.value_or(0) - last_stage_layers.value_or(0)) / middle;
}

int64_t ParallelConfig::chunk_layer_count(int64_t num_layers, int64_t stage) const {
  return stage_layer_count(num_layers, stage) / virtual_stages;
}

int64_t ParallelConfig::chunk_first_layer(int64_t num_layers, int64_t global_chunk) const {
  // The chunks before g in model order, each of its rank's chunk size. (In
  // RoundRobin that is round g / pp's num_layers / v per earlier round and
  // the ranks before g % pp inside it.)
  int64_t first = 0;
  for (int64_t g = 0; g < global_chunk; ++g)
    first += chunk_layer_count(num_layers, chunk_rank(pp, g, placement()));
  return first;
}

std::vector<int64_t> ParallelConfig::stage_layer_list(int64_t num_layers, int64_t stage) const {
  std::vector<int64_t> out;
  const int64_t per_chunk = chunk_layer_count(num_layers, stage);
  for (int64_t j = 0; j < virtual_stages; ++j) {
    const int64_t first =
        chunk_first_layer(num_layers, global_chunk(pp, stage, j, placement()));
    for (int64_t l = 0; l < per_chunk; ++l) out.push_back(first + l);
  }
  return out;
}

std::string ParallelConfig::stage_layers_str(int64_t num_layers, int64_t stage) const {
  std::string out;
  const int64_t per_chunk = chunk_layer_count(num_layers, stage);
  for (int64_t j = 0; j < virtual_stages; ++j) {
    const int64_t first =
        chunk_first_layer(num_layers, global_chunk(pp, stage, j, placement()));
    out += j ? ", " : "";
    out += per_chunk == 1 ? fmt::format("{}", first)
                          : fmt::format("{}-{}", first, first + per_chunk - 1);
  }
  return out;
}

std::string ParallelConfig::stage_split_str(int64_t num_layers) const {
  std::string out;
  for (int64_t s = 0; s < pp; ++s)
    out += fmt::format("{}{}", s ? " | " : "", stage_layer_count(num_layers, s));
  return out;
}

}  // namespace tessera

// ParallelConfig: the parallel degrees, pipeline schedule and batch geometry
// of a run, validated in one place before any rank allocates (as torchtitan's
// ParallelDims). The engine's grid (comm::GridLayout), the trainer, the
// planner's candidates (plan::PlanLayout) and a metrics file's run header
// (plan::RunMetrics) all hold one of these rather than their own copies.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/config/chunk_placement.h"
#include "tessera/config/gpt_config.h"

namespace tessera {

enum class Recompute { None, Selective, Full };

// --recompute-granularity none|selective|full; throws naming the flag.
Recompute recompute_parse(std::string_view name);
const char* recompute_name(Recompute r);

// ScheduleKind (config/chunk_placement.h): GPipe, OneFOneB, Interleaved,
// ZeroBubbleH1 (1F1B with backward split into input and weight gradients,
// Qi et al. 2024, "Zero Bubble Pipeline Parallelism"; parallel/schedule.h)
// and ZeroBubbleV (the split backward over two chunks per rank placed in a
// V: ChunkPlacement::V).

// How context-parallel ranks exchange keys and values (--cp-comm-type):
// p2p passes K/V blocks around the cp ring, overlapped with attention on
// the block in hand (Megatron-Core's default); all_gather gathers the whole
// sequence's K/V first (Llama 3's variant).
enum class CpCommType { P2p, AllGather };
CpCommType cp_comm_parse(std::string_view name);
const char* cp_comm_name(CpCommType t);

// How an MoE layer under expert parallelism moves tokens to the ranks that
// hold their experts (--moe-token-dispatcher-type, Megatron-Core's names):
// alltoall sends each rank exactly the rows its experts take; allgather
// gathers every rank's rows on every expert-parallel rank, each rank keeps
// the rows of its own experts, and a reduce-scatter brings the sums back.
enum class MoeDispatcher { AllToAll, AllGather };
MoeDispatcher moe_dispatcher_parse(std::string_view name);
const char* moe_dispatcher_name(MoeDispatcher d);

// CLI values of --pipeline-schedule: gpipe | 1f1b | interleaved | zb-h1 | zbv.
ScheduleKind schedule_kind_parse(std::string_view s);
const char* schedule_kind_name(ScheduleKind k);

// Throws tessera::Error naming the flag of the first impossible schedule:
// p pipeline ranks, v virtual stages each, m micro-batches per step. The
// schedule's own precondition (build_schedule calls it); the whole layout's
// check is ParallelConfig::validate.
void schedule_validate(ScheduleKind kind, int64_t p, int64_t v, int64_t m);

struct ParallelConfig {
  // The flags of these fields: parallel_fields.h (flag::tp, flag::pp, ...).
  int64_t tp = 1;                  // tensor-parallel ranks
  int64_t pp = 1;                  // pipeline stages
  int64_t dp = 1;                  // world / (tp * cp * pp)
  // Context-parallel ranks: each holds 1/cp of every sequence
  // (kernels/context_chunks.h); see docs/context_parallel.md.
  int64_t cp = 1;
  CpCommType cp_comm = CpCommType::P2p;
  // Expert-parallel ranks: each holds num_experts / ep of every MoE layer's
  // experts. As in Megatron-Core the expert-parallel group is carved out of
  // the dp x cp ranks (ep divides dp x cp; world stays tp x cp x pp x dp),
  // and the dense parameters stay replicated over all of them; see
  // docs/moe.md.
  int64_t ep = 1;
  MoeDispatcher moe_dispatcher = MoeDispatcher::AllToAll;
  int64_t virtual_stages = 1;      // model chunks per pipeline rank
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  int64_t micro_batch = 1;         // sequences per micro-batch per dp rank
  int64_t global_batch = 1;        // sequences per optimizer step
  int zero_stage = 0;              // 0-3
  Recompute recompute = Recompute::None;
  bool sequence_parallel = false;
  // Uneven pipeline stages (Megatron-Core's names): the first / last
  // pipeline stage holds this many transformer layers, the others split
  // the rest evenly. Unset: every stage holds num_layers / pp. With virtual
  // stages each rank's layers are cut into v equal chunks, so each count
  // must divide by v (as in Megatron-Core).
  std::optional<int64_t> first_stage_layers;  // --decoder-first-pipeline-num-layers
  std::optional<int64_t> last_stage_layers;   // --decoder-last-pipeline-num-layers

  // Micro-batches each dp rank runs per step (gradient accumulation steps).
  int64_t accumulation_steps() const { return global_batch / (micro_batch * dp); }

  int64_t world() const { return tp * cp * pp * dp; }

  // dp = world / (tp x cp x pp), after checking that it is a whole number (throws
  // naming the flags): how a launched job learns its data-parallel size.
  void set_world(int64_t world);
  // The degrees alone: tp, cp, pp >= 1 and world = tp x cp x pp x dp. Throws naming
  // the flags; what comm::GridLayout checks before it places ranks.
  void validate_degrees(int64_t world) const;
  // Expert-data-parallel ranks: the dp x cp ranks that hold the same
  // experts, over which the experts' gradients reduce.
  int64_t expert_dp() const { return dp * cp / ep; }
  // Everything: the degrees, the batch, the model's divisibility by tp and
  // pp x v, the sequence's into 2 x cp chunks, the experts' by ep, and the
  // schedule. Throws tessera::Error naming the flag(s) of the
  // first impossible setting. world: the ranks the job was launched with.
  void validate(const GPTConfig& model, int64_t world) const;
  std::string summary() const;

  // ---- which layers each pipeline stage holds (validate first) ----
  // The model is cut into pp x v chunks of consecutive layers; global chunk
  // g lives where the schedule's placement() puts it (chunk_placement.h):
  // pipeline rank g % pp as its local chunk g / pp, or zbv's V.
  // A rank's chunks all hold the same number of layers; ranks may differ.
  ChunkPlacement placement() const { return chunk_placement(schedule); }
  // The schedule splits backward into input and weight passes (zb-h1, zbv).
  bool split_backward() const {
    return pp > 1 && splits_backward(schedule);
  }
  bool uneven_stages() const { return first_stage_layers || last_stage_layers; }
  // Transformer layers held by pipeline rank `stage` (all its chunks).
  int64_t stage_layer_count(int64_t num_layers, int64_t stage) const;
  // Layers in each chunk of pipeline rank `stage`: stage_layer_count / v.
  int64_t chunk_layer_count(int64_t num_layers, int64_t stage) const;
  // First global layer of global chunk g (g in [0, pp x v]; pp x v gives
  // num_layers): the layers of the chunks before it, wherever they live.
  int64_t chunk_first_layer(int64_t num_layers, int64_t global_chunk) const;
  // The global layers pipeline rank `stage` holds, ascending (its local
  // chunks in order).
  std::vector<int64_t> stage_layer_list(int64_t num_layers, int64_t stage) const;
  // "3 | 2 | 2 | 1": the layers of each pipeline stage.
  std::string stage_split_str(int64_t num_layers) const;
  // "1-3" or, with virtual stages, "0-1, 6-7": the layers of stage `stage`.
  std::string stage_layers_str(int64_t num_layers, int64_t stage) const;
};

}  // namespace tessera

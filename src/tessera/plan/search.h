// Search: every layout of a model on a system, the ones that do not fit
// dropped (with the reason), the rest ranked by predicted throughput.
//
// Two passes: all candidates with the closed-form pipeline time, then the
// best few again with the engine's schedule simulated and every stage's
// memory, re-ranked. Ties go to the layout with less memory.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/plan/layout_cost.h"

namespace tessera::plan {

struct SearchSpace {
  int64_t devices = 1;
  int64_t global_batch = 1;
  // Empty: every value that divides (tp: heads, hidden and ffn, within one
  // node; pp: layers; micro-batch: global batch / dp, up to max_micro_batch).
  std::vector<int64_t> tp, pp, micro_batch, virtual_stages;
  std::vector<int> zero_stages{0, 1, 2, 3};
  std::vector<Recompute> recompute{Recompute::None, Recompute::Selective, Recompute::Full};
  std::vector<bool> sequence_parallel{false, true};
  // ZB-H1 (zero bubble, Qi et al. 2024) with pipelines of 2 or more
  // stages, where the engine runs it (any ZeRO stage, dense models).
  std::vector<ScheduleKind> schedules{ScheduleKind::OneFOneB, ScheduleKind::Interleaved,
                                      ScheduleKind::GPipe, ScheduleKind::ZeroBubbleH1};
  // Context-parallel sizes to try (docs/context_parallel.md). Empty: 1, and
  // for a sequence of kCpSearchMinSeq tokens or more every power of two up
  // to kCpSearchMax that splits it into 2 cp chunks and the devices: below
  // that length a rank's T / cp tokens leave the GEMMs too small for the
  // activations saved to be worth the ring, and Megatron's and NeMo's
  // recipes turn cp on only for long contexts. A search of the engine's own
  // runs (engine: plan --config, `tessera tune`) leaves out the cp > 1
  // layouts `tessera train` refuses (cp_unsupported_in_engine).
  std::vector<int64_t> cp;
  CpCommType cp_comm = CpCommType::P2p;  // --cp-comm-type of every cp > 1 candidate
  // Expert-parallel sizes to try for an MoE model (docs/moe.md). Empty:
  // every power of two dividing the experts and dp x cp (a search of the
  // engine's own runs: 1 until its trial keys carry ep). A dense model: 1.
  std::vector<int64_t> ep;
  Precision precision = Precision::Bf16;
  bool fp8 = false;  // --precision fp8: bf16 with FP8 linear GEMMs (PlanLayout::fp8)
  bool flash_attention = true;
  bool overlap_grad_reduce = false;   // --overlap-grad-reduce of every candidate
  bool overlap_param_gather = false;  // --overlap-param-gather (where ZeRO is 1 or 2)
  bool tp_comm_overlap = false;  // --tp-comm-overlap (where tp > 1 with sequence parallelism)
  bool engine = false;         // price tessera's own engine (PlanLayout::engine): plan --config
  bool tp_within_node = true;  // TP stays on the fast intra-node links (DESIGN.md)
  int64_t max_micro_batch = 16;
  int64_t max_virtual_stages = 8;
  int refine = 24;             // how many of the best to simulate exactly
  // Give each refined pipeline layout the fastest first/last-stage split
  // (--decoder-first/last-pipeline-num-layers) the planner finds, or keep
  // it even: the last stage also runs the LM head and loss, the first the
  // embedding, so lighter ends can even out the stages.
  bool uneven_stages = true;
  // A split every candidate takes as it is (plan --config of a run that
  // sets --decoder-first/last-pipeline-num-layers); unset: even.
  std::optional<int64_t> first_stage_layers, last_stage_layers;
};

// The fastest split of L's layers over its pipeline stages: even, or
// --decoder-first/last-pipeline-num-layers set, each end at most the even
// share and at least 8 x v layers below it, priced with `screen` (L's own
// split is replaced). An uneven split must beat the even one by 0.5 % to be
// chosen: a smaller gain is within the model's error and not worth an odd
// layout. Where the engine refuses the even split (pp x v does not divide
// the layers), the fastest allowed split is chosen.
PlanLayout best_stage_split(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L,
                            ParamCounter& params, const CostOptions& screen);

inline constexpr int64_t kCpSearchMinSeq = 16384;
inline constexpr int64_t kCpSearchMax = 32;

// The cp sizes a search tries (SearchSpace::cp, filled in when empty).
std::vector<int64_t> cp_candidates(const GPTConfig& model, const SearchSpace& space);

// Whether `tessera train` and tune's trials carry --expert-model-parallel-size
// (its field on the layout and trial surfaces: config/parallel_fields.cpp).
bool ep_in_engine_trials();

struct SearchResult {
  std::vector<LayoutCost> ranked;     // fitting layouts, best first
  int64_t candidates = 0;             // layouts enumerated
  int64_t too_big = 0;                // dropped: do not fit memory
  std::vector<LayoutCost> closest_misses;  // the least-memory layouts that do not fit
  double seconds = 0;                 // search wall time
};

SearchResult search_layouts(const GPTConfig& model, const SystemSpec& sys, const SearchSpace& space);

// Enumerated (valid) layouts of the space, before any cost: for tests and
// for telling a user that a device count has none.
std::vector<PlanLayout> enumerate_layouts(const GPTConfig& model, const SystemSpec& sys,
                                          const SearchSpace& space);

// Device counts near `devices` (below and above) that have at least one
// valid layout for the model and global batch; for error messages.
std::vector<int64_t> nearby_usable_device_counts(const GPTConfig& model, const SystemSpec& sys,
                                                 const SearchSpace& space);

}  // namespace tessera::plan

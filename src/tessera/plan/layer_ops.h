// What the planner prices per micro-batch: the engine's own op list
// (model/op_list.h) for one transformer layer and the model's ends on one
// tp rank, each entry priced by the cost models (GEMMs: gemm_model.h;
// attention: its FLOPs at the system's attention efficiency; memory-bound
// kernels: their own calls' measured rates (kernel_rates.h) or their bytes
// over the memory bandwidth; collectives: comm_model.h), summed by the profile kind the
// engine charges each to (core/profile.h). Nothing here restates a kernel:
// a kernel the engine gains is priced once it is in the list.
#pragma once
#include <cstdint>

#include "tessera/config/gpt_config.h"
#include "tessera/core/profile.h"
#include "tessera/model/op_list.h"
#include "tessera/plan/layout.h"
#include "tessera/plan/system.h"

namespace tessera::plan {

// Seconds of one transformer layer on one tp rank for one micro-batch, by
// kind of work. Op::Comm holds the tensor-parallel collectives (not
// overlapped with compute).
struct LayerOps {
  Profile forward, backward;
  Profile recompute;  // what backward re-runs of the forward (none / selective / full)
  // The part of `backward` a split backward's weight pass runs
  // (block_backward_weight, model/block.cpp): the four weight-gradient
  // GEMMs and their bias sums, and under sequence parallelism the two
  // LayerNorm outputs all-gathered again (priced as the forward's two
  // all-gathers, the same calls). Its recompute is not in it.
  Profile weight;
};

// The ends of the model for one micro-batch: the embedding lookup on the
// first stage; the final LayerNorm, the tied LM head over the tp-local
// vocabulary slice and the loss on the last (gpt.cpp).
struct EndOps {
  Profile embed_forward, embed_backward, head_forward, head_backward;
};

// The engine's op list of a layout: its micro-batch, tp, SP, recompute;
// mixed precision as the engine's bf16 (fp16 moves the same bytes); the
// model's dropout probabilities as trained; flash attention or not.
OpListConfig op_list_config(const GPTConfig& m, const PlanLayout& L);

// Seconds of one entry on one device of `sys` (before the in-situ factors).
double op_seconds(const OpEntry& e, const SystemSpec& sys, const PlanLayout& L);

// The list priced: `ol` is op_list(op_list_config(m, L)) (built once per
// layout by the caller; the forms without it build it).
LayerOps layer_ops(const OpList& ol, const SystemSpec& sys, const PlanLayout& L);
EndOps end_ops(const OpList& ol, const SystemSpec& sys, const PlanLayout& L);
LayerOps layer_ops(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L);
EndOps end_ops(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L);
// Blocking synchronisations per step on one rank (for SystemSpec::sync_wait):
// the tp collectives of the op list, and the step's dp / pp ones (the sum
// of a tied embedding's gradient between the first and last stages only
// when `tied_embeddings`).
double syncs_per_step(const OpList& ol, const PlanLayout& L, int64_t layers_per_chunk,
                      bool tied_embeddings);

}  // namespace tessera::plan

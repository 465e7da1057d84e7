// What the planner prices per micro-batch: one transformer layer's and the
// model's ends' work on one tp rank, by kind of work as the engine's profile
// names it (core/profile.h), and the blocking synchronisations of a step.
// Written after the kernels model/block.cpp and model/gpt.cpp call, in
// their order (issue 13 makes the engine publish this list instead).
#pragma once
#include <cstdint>

#include "tessera/config/gpt_config.h"
#include "tessera/core/profile.h"
#include "tessera/plan/layout.h"
#include "tessera/plan/system.h"

namespace tessera::plan {

// Seconds of one transformer layer on one tp rank for one micro-batch, by
// kind of work as the engine's profile names it (core/profile.h): the
// kernels model/block.cpp calls, in its order. Op::Comm holds the
// tensor-parallel collectives (not overlapped with compute).
struct LayerOps {
  Profile forward, backward;
  Profile recompute;  // what backward re-runs of the forward (none / selective / full)
};

// The ends of the model for one micro-batch: the embedding lookup on the
// first stage; the final LayerNorm, the tied LM head over the tp-local
// vocabulary slice and the loss on the last (gpt.cpp).
struct EndOps {
  Profile embed_forward, embed_backward, head_forward, head_backward;
};

LayerOps layer_ops(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L);
EndOps end_ops(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L);
// Blocking synchronisations per step on one rank (for SystemSpec::sync_wait).
double syncs_per_step(const PlanLayout& L, int64_t layers_per_chunk);

}  // namespace tessera::plan

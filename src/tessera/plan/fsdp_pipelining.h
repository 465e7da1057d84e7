// FSDP2 under torch.distributed.pipelining (torchtitan's PP + FSDP): every
// micro-batch but the last runs its backward without gradient sync, so each
// rank accumulates its stage's gradients unsharded, in FSDP's reduce dtype,
// until the last micro-batch's backward reduce-scatters them.
#pragma once
#include "tessera/plan/layout.h"
#include "tessera/plan/system.h"

namespace tessera::plan {

// Bytes one rank holds for the unsharded accumulated gradient of `params`
// parameters (its stage's, on its tp rank) through the step; 0 unless the
// layout is FSDP2 under pipelining (PlanLayout::fsdp2_pipelining).
double fsdp2_pipelining_grad_bytes(const PlanLayout& L, double params);

// Seconds one micro-batch's backward spends folding the fresh 16-bit
// gradients of `params` parameters into that accumulator (memory bound);
// 0 unless the layout is FSDP2 under pipelining.
double fsdp2_pipelining_accumulate_seconds(const SystemSpec& sys, const PlanLayout& L, double params);

}  // namespace tessera::plan

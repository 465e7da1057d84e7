// `tessera tune`'s model: the planner's system corrected by the trials
// measured so far, and the layouts it ranks. The correction is physical, per
// kind of work: for each kind the trials' measured seconds (their metrics'
// seconds_by_op) over what the planner predicted for the same ranks, pooled
// over the trials, scales the system's in-situ factor of that kind (the
// compute kinds) or its network efficiency (Op::Comm). It corrects the
// system the layouts share, never one layout's number, so a trial of one
// layout moves the prediction of all of them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/cli/tune_trial.h"
#include "tessera/config/gpt_config.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/search.h"
#include "tessera/plan/system.h"

namespace tessera::cli {

struct Correction {
  plan::SystemSpec system;  // base with the factors applied
  Profile factor;           // measured / predicted by kind (1 where nothing was measured)
  int64_t trials = 0;       // ok trials it rests on
};

// `base` corrected from the ok trials among `trials` (warm-up steps left out).
Correction correct_system(const plan::SystemSpec& base, const std::vector<Trial>& trials,
                          int64_t warmup);

// Every layout of `space` that fits, fastest first on `sys`, with overlap
// flags off and (where there is data parallelism to overlap) on.
std::vector<plan::LayoutCost> rank_layouts(const GPTConfig& m, const plan::SystemSpec& sys,
                                           const plan::SearchSpace& space);

// The planner's step time for L on sys; -1 when it rejects the layout.
double predicted_step(const GPTConfig& m, const plan::SystemSpec& sys, const plan::PlanLayout& L);

}  // namespace tessera::cli

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
#include <set>
#include <string>
#include <vector>

#include "tessera/tune/tune_trial.h"
#include "tessera/config/gpt_config.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/search.h"
#include "tessera/plan/system.h"

namespace tessera::tune {

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

// The fastest trial that ran, or null when none did.
const Trial* best_trial(const std::vector<Trial>& trials);

// How far the corrected model has been off so far: the mean |prediction /
// measured - 1| of the ok trials, each predicted from the trials before it
// (the first, uncorrected, left out); 0.30 until two trials say otherwise,
// never under 0.05 (the noise of a short trial).
double model_error(const std::vector<Trial>& trials);

// How new L is to the trials, in [0.25, 1]: 0.25 when it differs from a
// tried layout only in ZeRO stage or overlap flags, 0.5 for a tried
// (tp, cp, pp), 1 for a new one.
double novelty(const plan::PlanLayout& L, const std::vector<Trial>& trials);

// The next trial among `ranked` (fastest first on the corrected system):
// the untried layout (not in `tried`, by PlanLayout::str) with the largest
// expected improvement over the best measured step; the first untried when
// no trial ran yet; null when every layout has been tried.
const plan::LayoutCost* most_promising(const std::vector<plan::LayoutCost>& ranked,
                                       const std::vector<Trial>& trials,
                                       const std::set<std::string>& tried);

// Mean |predicted / measured - 1| over the ok trials the planner priced
// (`pred` > 0): predicted_before (uncorrected) or predicted_after
// (corrected from the trials before each); -1 when there are none.
double mean_error(const std::vector<Trial>& trials, double Trial::*pred);

// The same in-sample: every ok trial predicted on `corrected` (the system
// corrected from all of them).
double in_sample_error(const GPTConfig& m, const plan::SystemSpec& corrected,
                       std::vector<Trial> trials);

// The planner's step time for L on sys; -1 when it rejects the layout.
double predicted_step(const GPTConfig& m, const plan::SystemSpec& sys, const plan::PlanLayout& L);

}  // namespace tessera::tune

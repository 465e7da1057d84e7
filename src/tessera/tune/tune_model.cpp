#include "tessera/tune/tune_model.h"

#include <algorithm>
#include <cmath>

#include "tessera/core/error.h"
#include "tessera/plan/validate.h"

namespace tessera::tune {

Correction correct_system(const plan::SystemSpec& base, const std::vector<Trial>& trials,
                          int64_t warmup) {
  Correction c;
  c.system = base;
  c.factor = plan::SystemSpec::unit_factors();
  std::vector<std::string> paths;
  Precision precision = Precision::Fp32;  // the trials': the base run's, the same in all
  for (const Trial& t : trials)
    if (t.ok()) paths.push_back(t.metrics), precision = t.layout.precision;
  if (paths.empty()) return c;
  const plan::Validation v = plan::validate_runs(paths, base, size_t(warmup));
  Profile measured, predicted;
  for (const plan::RunCheck& r : v.runs) {
    // Ranks sharing a CPU core time each op by the wall clock, their core
    // partners' turns included, where the planner prices it on a core of its
    // own and adds the sharing to the step (layout_cost.cpp): compare the
    // op times over the predicted share (the step / the step unshared).
    const plan::StepBreakdown& t = r.predicted.time;
    const double share = t.core_sharing > 0 ? t.step / (t.step - t.core_sharing) : 1.0;
    measured.add(r.measured_ops, 1.0 / share);
    predicted.add(r.predicted_ops, 1.0);
  }
  c.trials = int64_t(paths.size());
  for (size_t k = 0; k < size_t(Op::kCount); ++k) {
    // A kind both sides saw: its ratio. Kinds the planner does not price on
    // this machine or the engine did not time stay as they were.
    if (measured.seconds[k] <= 0 || predicted.seconds[k] <= 0) continue;
    const double f = measured.seconds[k] / predicted.seconds[k];
    c.factor.seconds[k] = f;
    if (Op(k) == Op::Comm) {
      for (plan::NetworkTier& t : c.system.tiers) t.efficiency /= f;
    } else {
      for (Profile* table : c.system.in_situ_tables(precision)) table->seconds[k] *= f;
    }
  }
  return c;
}

std::vector<plan::LayoutCost> rank_layouts(const GPTConfig& m, const plan::SystemSpec& sys,
                                           const plan::SearchSpace& space) {
  std::vector<plan::LayoutCost> all;
  for (bool overlap : {false, true}) {
    plan::SearchSpace sp = space;
    sp.overlap_grad_reduce = overlap;
    sp.overlap_param_gather = overlap;  // where ZeRO is 1 or 2 (search.cpp)
    plan::SearchResult r = plan::search_layouts(m, sys, sp);
    for (plan::LayoutCost& c : r.ranked)
      if (!overlap || c.layout.par.dp > 1) all.push_back(std::move(c));
  }
  std::stable_sort(all.begin(), all.end(), [](const plan::LayoutCost& a, const plan::LayoutCost& b) {
    return a.time.step < b.time.step;
  });
  return all;
}

double predicted_step(const GPTConfig& m, const plan::SystemSpec& sys, const plan::PlanLayout& L) {
  if (L.par.dp < 1) return -1;
  try {
    return plan::evaluate_layout(m, sys, L).time.step;
  } catch (const Error&) {
    return -1;
  }
}

// The fastest trial that ran, or null when none did.
const Trial* best_trial(const std::vector<Trial>& trials) {
  const Trial* best = nullptr;
  for (const Trial& x : trials)
    if (x.ok() && (!best || x.measured < best->measured)) best = &x;
  return best;
}

// How far the corrected model has been off so far: the mean |prediction /
// measured - 1| of the ok trials, each predicted from the trials before it
// (the first, uncorrected, left out). 30 % until two trials say otherwise
// (the planner's error on this machine before any correction), and never
// under 5 % (the noise of a short trial).
double model_error(const std::vector<Trial>& trials) {
  double sum = 0;
  int n = 0;
  bool first = true;
  for (const Trial& t : trials) {
    if (!t.ok() || t.predicted_after <= 0) continue;
    if (!first) sum += std::abs(t.predicted_after / t.measured - 1), ++n;
    first = false;
  }
  return n == 0 ? 0.30 : std::max(0.05, sum / n);
}

// How new L is to the trials, in [0.25, 1]: a layout that differs from a
// tried one only in its ZeRO stage or overlap flags shares most of the work
// that was measured (0.25); one with a tried (tp, cp, pp) shares its kernels
// and communication pattern (0.5); a new (tp, cp, pp) shares neither (1):
// cp changes every rank's sequence length and adds the K/V ring.
double novelty(const plan::PlanLayout& L, const std::vector<Trial>& trials) {
  double n = 1.0;
  for (const Trial& t : trials) {
    const ParallelConfig &a = L.par, &b = t.layout.par;
    if (a.tp != b.tp || a.cp != b.cp || a.pp != b.pp) continue;
    const bool same_work = a.micro_batch == b.micro_batch && a.recompute == b.recompute &&
                           a.schedule == b.schedule && a.virtual_stages == b.virtual_stages &&
                           a.sequence_parallel == b.sequence_parallel &&
                           a.first_stage_layers == b.first_stage_layers &&
                           a.last_stage_layers == b.last_stage_layers;
    n = std::min(n, same_work ? 0.25 : 0.5);
  }
  return n;
}

// The next trial: the untried layout with the largest expected improvement
// over the fastest measured step, its step taken as normal around the
// corrected prediction with a spread of the model's error times its
// novelty. Greedy on the corrected model alone keeps trying near-copies of
// the first family it likes (ZeRO stages, overlap flags: equal to within
// noise); the spread sends trials to families the trials have not
// measured when they could still be faster. Before any trial ran: the
// fastest prediction. Null when every layout has been tried.
const plan::LayoutCost* most_promising(const std::vector<plan::LayoutCost>& ranked,
                                       const std::vector<Trial>& trials,
                                       const std::set<std::string>& tried) {
  const Trial* best = best_trial(trials);
  const double err = model_error(trials);
  const plan::LayoutCost* pick = nullptr;
  double pick_gain = -1;
  for (const plan::LayoutCost& c : ranked) {
    if (tried.count(c.layout.str())) continue;
    if (!best) return &c;  // ranked is fastest first
    const double mu = c.time.step, sigma = err * novelty(c.layout, trials) * mu;
    const double z = (best->measured - mu) / sigma;
    const double gain = (best->measured - mu) * 0.5 * std::erfc(-z / std::sqrt(2.0)) +
                        sigma * std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI);
    if (gain > pick_gain) pick_gain = gain, pick = &c;
  }
  return pick;
}

double mean_error(const std::vector<Trial>& trials, double Trial::*pred) {
  double sum = 0;
  int n = 0;
  for (const Trial& t : trials)
    if (t.ok() && t.*pred > 0) sum += std::abs(t.*pred / t.measured - 1), ++n;
  return n ? sum / n : -1;
}

double in_sample_error(const GPTConfig& m, const plan::SystemSpec& corrected,
                       std::vector<Trial> trials) {
  for (Trial& t : trials) t.predicted_after = predicted_step(m, corrected, t.layout);
  return mean_error(trials, &Trial::predicted_after);
}

}  // namespace tessera::tune

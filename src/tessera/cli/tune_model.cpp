#include "tessera/cli/tune_model.h"

#include <algorithm>

#include "tessera/core/error.h"
#include "tessera/plan/validate.h"

namespace tessera::cli {

Correction correct_system(const plan::SystemSpec& base, const std::vector<Trial>& trials,
                          int64_t warmup) {
  Correction c;
  c.system = base;
  c.factor = plan::SystemSpec::unit_factors();
  std::vector<std::string> paths;
  for (const Trial& t : trials)
    if (t.ok()) paths.push_back(t.metrics);
  if (paths.empty()) return c;
  const plan::Validation v = plan::validate_runs(paths, base, size_t(warmup));
  Profile measured, predicted;
  for (const plan::RunCheck& r : v.runs) {
    measured.add(r.measured_ops, 1.0);
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
      c.system.in_situ.seconds[k] *= f;
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

}  // namespace tessera::cli

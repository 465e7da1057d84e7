#include "tessera/plan/validate.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "tessera/config/config_json.h"
#include "tessera/comm/grid_layout.h"
#include "tessera/core/error.h"

namespace tessera::plan {

namespace {

// The engine's layout as the planner names it: its precision modelled as
// the engine (fp32 state, the engine's 16-bit arena: PlanLayout::engine); its attention is blockwise
// (kernels/cpu/attention.h), so it never stores the score matrices — the
// planner's flash-attention case.
PlanLayout engine_layout(const RunMetrics& r) {
  PlanLayout L;
  L.par = r.par;
  // read_run_metrics accepts only the three names.
  TESSERA_CHECK(precision_parse(r.precision, L.precision), "precision '{}'", r.precision);
  L.engine = true;
  L.flash_attention = true;
  L.overlap_grad_reduce = r.overlap_grad_reduce;
  L.overlap_param_gather = r.overlap_param_gather;
  if (const double imb = median_moe_imbalance(r, 0); imb > 0) L.moe_imbalance = imb;
  return L;
}

}  // namespace

Validation validate_runs(const std::vector<std::string>& paths, const SystemSpec& sys,
                         size_t warmup_steps) {
  return validate_runs(paths, std::vector<SystemSpec>{sys}, warmup_steps);
}

Validation validate_runs(const std::vector<std::string>& paths,
                         const std::vector<SystemSpec>& systems, size_t warmup_steps) {
  TESSERA_CHECK(!paths.empty(), "--validate: give at least one metrics file");
  TESSERA_CHECK(!systems.empty(), "--validate: no system to predict on");
  Validation v;
  v.systems = systems.size();
  double step_sum = 0, mem_sum = 0;
  // Repeats of one layout are pooled into one check (run_metrics.h).
  std::vector<std::vector<RunMetrics>> groups;
  std::vector<std::string> keys;
  for (const auto& path : paths) {
    RunMetrics r = read_run_metrics(path);
    check_enough_steps(r, warmup_steps);
    const std::string key = fmt::format("{}|{}|{}|{}", model_to_json(r.model).dump(),
                                        engine_layout(r).str(), r.precision, r.rank);
    const auto at = std::find(keys.begin(), keys.end(), key);
    if (at == keys.end()) {
      keys.push_back(key);
      groups.push_back({std::move(r)});
    } else {
      groups[size_t(at - keys.begin())].push_back(std::move(r));
    }
  }
  for (const auto& group : groups) {
    RunCheck c;
    c.run = pool_runs(group, warmup_steps);
    c.repeats = group.size();
    c.measured_step = median_step_seconds(c.run, 0);
    std::vector<LayoutCost> predictions;
    try {
      for (const auto& sys : systems)
        predictions.push_back(evaluate_layout(c.run.model, sys, engine_layout(c.run)));
    } catch (const Error& e) {
      fail("{}: the planner rejects this run's layout: {}", group.front().path, e.what());
    }
    std::sort(predictions.begin(), predictions.end(),
              [](const LayoutCost& x, const LayoutCost& y) { return x.time.step < y.time.step; });
    c.predicted = std::move(predictions[predictions.size() / 2]);
    c.step_error = (c.predicted.time.step - c.measured_step) / c.measured_step;
    const comm::GridLayout grid{int(c.run.par.world()), int(c.run.par.tp), int(c.run.par.pp),
                                int(c.run.par.dp), int(c.run.par.cp)};
    c.stage = grid.coord_of(int(c.run.rank)).pp;
    c.measured_ops = median_step_ops(c.run, 0);
    for (const auto& sc : c.predicted.stages)
      if (sc.stage == c.stage) c.predicted_ops = sc.ops;
    step_sum += std::abs(c.step_error);
    if (c.run.memory && c.run.memory->total() > 0) {
      c.has_memory = true;
      c.measured_memory = c.run.memory->total();
      c.memory_error = (c.predicted.peak_memory - c.measured_memory) / c.measured_memory;
      mem_sum += std::abs(c.memory_error);
      ++v.memory_runs;
    }
    v.runs.push_back(std::move(c));
  }
  v.step_mape = step_sum / double(v.runs.size());
  if (v.memory_runs > 0) v.memory_mape = mem_sum / double(v.memory_runs);
  return v;
}

namespace {

// Each kind of work of one run: measured and predicted milliseconds per step.
std::string format_ops(const RunCheck& c) {
  std::string out = fmt::format("\n{} ({}), pipeline stage {}: ms per step by kind of work\n",
                                c.run.path, c.predicted.layout.str(), c.stage);
  out += fmt::format("  {:<10} {:>9} {:>9} {:>8}\n", "kind", "measured", "predicted", "error");
  for (size_t k = 0; k < size_t(Op::kCount); ++k) {
    const double meas = c.measured_ops.seconds[k], pred = c.predicted_ops.seconds[k];
    if (meas < 1e-4 && pred < 1e-4) continue;  // under 0.1 ms either way: not worth a line
    out += fmt::format("  {:<10} {:>9.1f} {:>9.1f}", op_name(Op(k)), meas * 1e3, pred * 1e3);
    out += meas > 0 ? fmt::format(" {:>+7.0f}%\n", 100 * (pred - meas) / meas) : "\n";
  }
  const double meas = c.measured_ops.total(), pred = c.predicted_ops.total();
  out += fmt::format("  {:<10} {:>9.1f} {:>9.1f} {:>+7.0f}%   (step {:.1f} / {:.1f}: the rest is "
                     "waiting, bubble and untimed work)\n",
                     "sum", meas * 1e3, pred * 1e3, meas > 0 ? 100 * (pred - meas) / meas : 0.0,
                     c.measured_step * 1e3, c.predicted.time.step * 1e3);
  return out;
}

}  // namespace

std::string format_validation(const Validation& v, const SystemSpec& sys, bool by_op) {
  std::string out = fmt::format(
      "planner ({}, fp32) against {} measured run(s); step time = median after 2 warm-up steps, "
      "memory = the largest rank's params + grads + optimizer + activations\n",
      sys.name, v.runs.size());
  if (v.systems > 1)
    out += fmt::format("predicted: the median over {} calibrations of the machine\n", v.systems);
  out += "\n";
  out += fmt::format("{:<28} {:<36} {:>10} {:>10} {:>7}   {:>9} {:>9} {:>7}\n", "run", "layout",
                     "step (ms)", "predicted", "error", "mem (MB)", "predicted", "error");
  for (const auto& c : v.runs) {
    std::string name = c.run.path.substr(c.run.path.find_last_of('/') + 1);
    if (name.size() > 28) name = "..." + name.substr(name.size() - 25);
    out += fmt::format("{:<28} {:<36} {:>10.1f} {:>10.1f} {:>+6.1f}%", name,
                       c.predicted.layout.str(), c.measured_step * 1e3,
                       c.predicted.time.step * 1e3, 100 * c.step_error);
    if (c.has_memory)
      out += fmt::format("   {:>9.1f} {:>9.1f} {:>+6.1f}%", c.measured_memory / 1e6,
                         c.predicted.peak_memory / 1e6, 100 * c.memory_error);
    else
      out += "   (no memory recorded)";
    if (c.run.threads > 0) out += fmt::format("  [{} threads]", c.run.threads);
    // An MoE run's measured imbalance: what the slowest expert-parallel
    // rank's share of the experts' GEMMs is priced at (moe_cost.h); one
    // rank running every expert does the same work however the tokens fall.
    if (const double imb = median_moe_imbalance(c.run, 0); imb > 0)
      out += fmt::format("  [moe imbalance {:.2f}]", imb);
    out += "\n";
  }
  out += fmt::format("\nmean absolute error: step time {:.1f}% over {} run(s)", 100 * v.step_mape,
                     v.runs.size());
  if (v.memory_runs > 0)
    out += fmt::format(", memory {:.1f}% over {} run(s)", 100 * v.memory_mape, v.memory_runs);
  out += "\n";
  if (by_op)
    for (const auto& c : v.runs) out += format_ops(c);
  return out;
}

}  // namespace tessera::plan

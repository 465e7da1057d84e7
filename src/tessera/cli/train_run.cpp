#include "tessera/cli/train_run.h"

#include <fmt/core.h>

#include "tessera/bridge/run_calibration.h"
#include "tessera/bridge/run_plan.h"
#include "tessera/core/error.h"
#include "tessera/plan/report.h"

namespace tessera::cli {

TrainConfig read_planned_run(const std::string& path) {
  int64_t vocab_flag = 0;
  TrainConfig c = read_train_config(path, &vocab_flag);
  return bridge::planned_run(std::move(c), vocab_flag, path);
}

void print_dry_run(const TrainConfig& c, int64_t ranks, int64_t threads,
                   const std::string& system) {
  plan::SystemSpec sys = plan::load_system(system.empty() ? "local" : system);
  if (system.empty())
    bridge::use_run_calibration(sys, {c.model, c.par.micro_batch, c.par.tp, ranks, threads,
                                      c.precision()});
  const plan::PlanLayout L = bridge::layout_of_run(c);
  plan::LayoutCost cost;
  try {
    cost = plan::evaluate_layout(c.model, sys, L);
  } catch (const Error& e) {
    fail("--dry-run: the planner cannot price this layout: {}", e.what());
  }
  fmt::print("dry run: {} rank(s) planned on system '{}' ({}); nothing allocated\n", ranks,
             sys.name, sys.source);
  fmt::print("layout: {}\n", L.str());
  fmt::print("model: {}\n", c.model.summary());
  fmt::print("{}", plan::format_breakdown(cost, sys));
  fmt::print("memory per rank: {:.3f} GB at the peak (stage {}), {:.3f} GB usable: {}\n",
             cost.peak_memory / 1e9, cost.peak_stage, sys.usable_memory() / 1e9,
             cost.fits ? "fits" : plan::over_memory_text(cost));
  fmt::print("predicted step: {:.4f} s, {:.0f} tokens/s\n", cost.time.step, cost.tokens_per_second);
  const std::string warning = plan::calibration_mismatch(sys, ranks, threads);
  if (!warning.empty()) fmt::print("warning: {}\n", warning);
  if (const std::string w = plan::shared_core_calibration(sys); !w.empty())
    fmt::print("warning: {}\n", w);
}

}  // namespace tessera::cli

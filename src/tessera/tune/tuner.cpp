#include "tessera/tune/tuner.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>

#include "tessera/core/error.h"
#include "tessera/core/output_file.h"
#include "tessera/tune/trial_log.h"
#include "tessera/tune/tune_model.h"

namespace tessera::tune {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The next layout to try: the first untried --include, else the most
// promising untried layout under the corrected system; false when none is
// left. Takes what it uses off `includes`.
bool next_layout(const TuneRequest& r, const plan::SearchSpace& space, const Correction& corr,
                 const std::vector<Trial>& trials, const std::set<std::string>& tried,
                 std::vector<plan::PlanLayout>& includes, plan::PlanLayout& out) {
  while (!includes.empty()) {
    out = includes.front();
    includes.erase(includes.begin());
    if (!tried.count(out.str())) return true;
  }
  const std::vector<plan::LayoutCost> ranked = rank_layouts(r.base.model, corr.system, space);
  if (const plan::LayoutCost* next = most_promising(ranked, trials, tried)) {
    out = next->layout;
    return true;
  }
  return false;
}

}  // namespace

bridge::TrainKeys run_keys_with_layout(const std::string& config, const plan::PlanLayout& L) {
  bridge::TrainKeys keys = bridge::non_layout_keys_of_file(config);
  for (const bridge::TrainKey& key : bridge::layout_keys(L)) keys.push_back(key);
  return keys;
}

TuneResult run_trials(const TuneRequest& r) {
  const plan::SystemSpec& sys = r.system;
  plan::SearchSpace space;
  space.devices = r.ranks;
  space.global_batch = r.base.par.global_batch;
  space.engine = true;
  space.flash_attention = true;
  space.precision = r.base.precision();
  space.cp_comm = r.base.par.cp_comm;  // the run's K/V exchange for every cp > 1 trial
  const plan::PlanLayout base_layout = bridge::layout_of_run(r.base);
  std::vector<plan::PlanLayout> includes;
  for (const std::string& f : r.include)
    includes.push_back(parse_layout_flags(f, r.ranks, base_layout));
  const std::vector<plan::LayoutCost> fitting = rank_layouts(r.base.model, sys, space);
  if (includes.empty() && fitting.empty())
    fail("tune: no layout of this model fits {} rank(s) on system '{}'{}", r.ranks, sys.name,
         r.max_memory_gb > 0 ? fmt::format(" within --max-memory-gb {}", r.max_memory_gb) : "");

  std::filesystem::create_directories(r.trial.dir);
  TuneResult out;
  std::vector<Trial>& trials = out.trials;
  if (r.resume) {
    trials = read_trial_log(r.log);
    fmt::print("resumed {} trial(s) from {}\n", trials.size(), r.log);
  } else {
    check_output_file(r.log, "--log");
    write_output_file(r.log, "", "--log");  // a new, empty log (a device is only opened)
  }
  if (!r.output.empty()) check_output_file(r.output, "--output");
  std::set<std::string> tried;
  for (const Trial& t : trials) tried.insert(t.layout.str());

  // The trials this run will take: the budget, or fewer when fewer
  // layouts are left untried (an exhaustive pass gives a budget no space
  // reaches); the progress line's "of N" and its ETA count these.
  std::set<std::string> untried;
  for (const plan::LayoutCost& c : fitting)
    if (!tried.count(c.layout.str())) untried.insert(c.layout.str());
  for (const plan::PlanLayout& L : includes)
    if (!tried.count(L.str())) untried.insert(L.str());
  const int64_t planned = std::min(r.budget_trials, int64_t(untried.size()));

  const auto start = Clock::now();
  out.first_new = trials.size();
  for (int64_t k = 0; k < r.budget_trials; ++k) {
    if (r.budget_seconds > 0 && seconds_since(start) >= r.budget_seconds) {
      fmt::print("--budget-seconds {} reached after {} trial(s)\n", r.budget_seconds, k);
      break;
    }
    const Correction corr = correct_system(sys, trials, r.trial.warmup);
    Trial t;
    t.index = int64_t(trials.size()) + 1;
    if (!next_layout(r, space, corr, trials, tried, includes, t.layout)) {
      fmt::print("every layout that fits has been tried\n");
      break;
    }
    tried.insert(t.layout.str());
    t.flags = layout_flags(t.layout);
    t.config =
        (std::filesystem::path(r.trial.dir) / fmt::format("trial_{:03d}.toml", t.index)).string();
    write_output_file(t.config,
                      bridge::train_config_toml(
                          run_keys_with_layout(r.config, t.layout),
                          fmt::format("tessera tune trial {}: {}", t.index, t.layout.str())),
                      "--work-dir");
    t.predicted_before = predicted_step(r.base.model, sys, t.layout);
    t.predicted_after = predicted_step(r.base.model, corr.system, t.layout);
    fmt::print("trial {} of {}: {} (planned {} ms, corrected {} ms)\n", t.index,
               int64_t(out.first_new) + planned, t.layout.str(), ms_text(t.predicted_before),
               ms_text(t.predicted_after));
    std::fflush(stdout);
    run_trial(r.trial, t);
    trials.push_back(t);
    append_trial_log(r.log, t);
    const Trial* best = best_trial(trials);
    const double done = seconds_since(start);
    const double eta = done / double(k + 1) * double(std::max<int64_t>(planned - k - 1, 0));
    fmt::print("  {} {}; best so far {} ms (trial {}); {:.0f} s, ETA {:.0f} s\n", t.status,
               t.ok() ? fmt::format("{} ms/step", ms_text(t.measured)) : t.reason,
               best ? ms_text(best->measured) : "-", best ? best->index : 0, done, eta);
    std::fflush(stdout);
  }
  return out;
}

}  // namespace tessera::tune

// `tessera tune`'s loop: the study's layout search run for real. The planner
// proposes, a short `tessera train` trial measures (tune_trial.h), the
// planner's system is corrected from the measurement (tune_model.h), and the
// next trial is the untried layout with the largest expected improvement
// under the corrected model (most_promising): a planner good to ~15 % ranks
// right what matters (memory, bubbles, communication volume) and is wrong by
// factors the trials measure (kernel speeds in situ, the network), so its
// corrected prediction is the mean, and its remaining error, larger for
// layouts unlike any tried, the spread.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/bridge/run_plan.h"
#include "tessera/plan/system.h"
#include "tessera/train/train_config.h"
#include "tessera/tune/tune_trial.h"

namespace tessera::tune {

// One tuning: what cli/cmd_tune.cpp read from its flags, checked.
struct TuneRequest {
  std::string config;               // the run's train --config file
  TrainConfig base;                 // that run as the planner sees it (cli/train_run.h)
  plan::SystemSpec system;          // the planner's system, --max-memory-gb applied
  double max_memory_gb = 0;         // 0: no limit (named in the "nothing fits" error)
  int64_t ranks = 1;                // ranks a trial runs on
  int64_t budget_trials = 8;        // trials to run at most
  double budget_seconds = 0;        // no trial starts after this long (0: no limit)
  std::vector<std::string> include; // layouts to try first, as train flags
  std::string log;                  // the trial log this run writes (new, or resume's)
  bool resume = false;              // continue the trials of `log`, appending to it
  std::string output;               // --output: checked writable before the first trial
  TrialSettings trial;              // how a trial runs; trial.dir: where its files go
};

struct TuneResult {
  std::vector<Trial> trials;  // the resumed ones first, then this run's
  size_t first_new = 0;       // index in `trials` of this run's first
};

// Runs the trials, each appended to the log as it ends, with a progress
// line per trial on stdout. Throws when nothing fits and no --include was
// given, before any trial.
TuneResult run_trials(const TuneRequest& r);

// The run's settings with layout L's: a setting of the base layout L leaves
// out (sequence parallelism, virtual stages) cannot leak into the trial.
bridge::TrainKeys run_keys_with_layout(const std::string& config, const plan::PlanLayout& L);

}  // namespace tessera::tune

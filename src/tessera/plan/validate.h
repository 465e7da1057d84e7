// `tessera plan --validate RUNS.jsonl...`: the planner's prediction for each
// measured run's own layout beside what the run measured, and the mean
// absolute percentage error over the runs (issue 7: <= 10 % step time,
// <= 5 % memory over 12 local layouts once the parallel engine has landed).
#pragma once
#include <string>
#include <vector>

#include "tessera/plan/layout_cost.h"
#include "tessera/plan/run_metrics.h"
#include "tessera/plan/system.h"

namespace tessera::plan {

struct RunCheck {
  RunMetrics run;                // pooled over the repeats of this layout
  size_t repeats = 1;            // metrics files pooled
  LayoutCost predicted;          // the layout as the engine runs it: fp32, flash attention
  double measured_step = 0;      // median after warm-up
  double step_error = 0;         // (predicted - measured) / measured
  bool has_memory = false;
  double measured_memory = 0, memory_error = 0;
  // Where the time goes on the rank that wrote the file (its pipeline
  // stage): medians of its "seconds_by_op" beside the planner's StageCost::ops.
  int64_t stage = 0;
  Profile measured_ops, predicted_ops;
};

struct Validation {
  size_t systems = 1;            // calibrations each run was predicted on
  std::vector<RunCheck> runs;
  double step_mape = 0;          // mean |step_error|
  double memory_mape = 0;        // over the runs that recorded memory
  int memory_runs = 0;
};

// Files of the same model, layout and writing rank are repeats and pooled
// into one check. With several systems (calibrations of one machine taken
// across the runs, which on a shared machine drift in speed from minute to
// minute) each check is predicted on every one and the prediction with the
// median step time is compared. Throws tessera::Error for unreadable files,
// runs with no steps past the warm-up, or layouts the planner rejects.
Validation validate_runs(const std::vector<std::string>& paths,
                         const std::vector<SystemSpec>& systems, size_t warmup_steps = 2);
Validation validate_runs(const std::vector<std::string>& paths, const SystemSpec& sys,
                         size_t warmup_steps = 2);

// One line per run and the two mean errors; with by_op, then a table per
// run of each kind of work, measured beside predicted.
std::string format_validation(const Validation& v, const SystemSpec& sys, bool by_op = false);

}  // namespace tessera::plan

// `tessera tune`'s trials: one layout run for real as a short `tessera
// train` under the user's launcher, with a time limit, measured from its
// metrics file. A trial that fails (bad layout, out of memory, a crash, a
// hang) is a result with its reason, never an exception.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/plan/layout.h"

namespace tessera::tune {

struct Trial {
  int64_t index = 0;              // 1-based, in the order run
  plan::PlanLayout layout;        // dp = ranks / (tp cp pp); 0 when they do not divide
  std::string flags;              // the layout as `tessera train` flags (what was run)
  double predicted_before = -1;   // s/step, the planner uncorrected (-1: it rejects the layout)
  double predicted_after = -1;    // s/step, the planner as corrected when the trial was chosen
  std::string status;             // ok | failed | timeout | over-memory
  std::string reason;             // why not ok: the trial's error line
  double measured = 0;            // s/step, median of the steps after the warm-up
  double memory = 0;              // bytes, the fullest rank (from the metrics header)
  double seconds = 0;             // wall time of the whole trial
  std::string config;             // the trial's `tessera train --config` file
  std::string metrics, log;       // the trial's metrics file and its output
  bool ok() const { return status == "ok"; }
};

// A step time in seconds as milliseconds for the tables, "-" when the
// planner rejected the layout (a negative time).
std::string ms_text(double s);

nlohmann::json trial_to_json(const Trial& t);
// Throws tessera::Error naming `where` for a line that is not a trial.
Trial trial_from_json(const nlohmann::json& j, const std::string& where);

struct TrialSettings {
  std::vector<std::string> launcher;  // e.g. {"scripts/mpirun.sh", "-n", "4"}; empty: run directly
  std::string tessera;                // the binary the trials run
  int64_t steps = 20, warmup = 3;     // steps per trial; the first `warmup` are not measured
  double timeout = 300;               // seconds before a trial is killed
  double max_memory = 0;              // bytes per rank a trial may use (0: no limit)
  std::string dir;                    // where trial files go
};

// Runs `tessera train --config t.config` for `s.steps` steps; fills status,
// reason, measured, memory, seconds, metrics and log.
void run_trial(const TrialSettings& s, Trial& t);

// Whitespace-separated words (a launcher, --include's flags).
std::vector<std::string> split_words(const std::string& s);

// The train flags of a layout: degrees (cp and its K/V exchange where cp >
// 1), batch, ZeRO, recompute, sequence parallelism, schedule, virtual
// stages, overlap flags.
std::string layout_flags(const plan::PlanLayout& L);
// The inverse, for --include: the layout keys of `flags`; `ranks` gives dp.
// Throws naming --include for a word that is not a layout flag.
plan::PlanLayout parse_layout_flags(const std::string& flags, int64_t ranks,
                                    const plan::PlanLayout& base);

}  // namespace tessera::tune

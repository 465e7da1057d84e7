// `tessera tune`: its flags, checked, handed to the tuner's loop
// (tune/tuner.h), and its summary printed: the trials' table, the planner's
// error on them, the best layout as a train command and --output file.
#include <fmt/core.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "tessera/cli/commands.h"
#include "tessera/cli/train_run.h"
#include "tessera/core/error.h"
#include "tessera/core/output_file.h"
#include "tessera/plan/calibrate_run.h"
#include "tessera/plan/report.h"
#include "tessera/tune/tune_model.h"
#include "tessera/tune/tuner.h"

namespace tessera::cli {

namespace {

using tune::Trial;

struct TuneArgs {
  std::string config, launcher, system = "local", output, log, resume, work_dir = "tune-runs";
  int64_t budget_trials = 8, steps = 20, warmup = 3, ranks = 0;
  double budget_seconds = 0, max_memory_gb = 0, trial_timeout = 300;
  std::vector<std::string> include;
};

// The launcher's rank count: its -n / -np / --ntasks / -N value.
int64_t launcher_ranks(const std::vector<std::string>& l) {
  for (size_t i = 0; i + 1 < l.size(); ++i)
    if (l[i] == "-n" || l[i] == "-np" || l[i] == "--ntasks" || l[i] == "--np") {
      try {
        return std::stoll(l[i + 1]);
      } catch (const std::exception&) {
        fail("--launcher: '{} {}' is not a rank count", l[i], l[i + 1]);
      }
    }
  return 0;
}

bool runnable(const std::string& prog) {
  if (prog.find('/') != std::string::npos) return access(prog.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string d; std::getline(dirs, d, ':');)
    if (!d.empty() && access((std::filesystem::path(d) / prog).c_str(), X_OK) == 0) return true;
  return false;
}

std::string self_binary() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  TESSERA_CHECK(!ec, "tune: cannot find the tessera binary (/proc/self/exe): {}", ec.message());
  return p.string();
}

// One row per trial within 100 columns; why each trial that did not run
// well failed, below the table.
std::string trials_table(const std::vector<Trial>& trials) {
  std::string out = fmt::format("{:>3}  {:<50} {:>9} {:>9} {:>9}  {}\n", "#", "layout",
                                "plan ms", "corr ms", "meas ms", "status");
  std::string why;
  for (const Trial& t : trials) {
    out += fmt::format("{:>3}  {:<50} {:>9} {:>9} {:>9}  {}\n", t.index, t.layout.str(),
                       tune::ms_text(t.predicted_before), tune::ms_text(t.predicted_after),
                       t.ok() ? tune::ms_text(t.measured) : "-", t.status);
    if (!t.ok()) why += fmt::format("trial {} {}: {}\n", t.index, t.status, t.reason.substr(0, 200));
  }
  return out + why;
}

void run_tune(const TuneArgs& a) {
  // Everything checked before the first trial.
  TESSERA_CHECK(a.budget_trials >= 1, "--budget-trials must be >= 1 (got {})", a.budget_trials);
  TESSERA_CHECK(a.budget_seconds >= 0, "--budget-seconds must be >= 0 (got {})", a.budget_seconds);
  TESSERA_CHECK(a.steps >= 2 && a.warmup >= 0 && a.warmup < a.steps,
                "--steps ({}) must be >= 2 and above --warmup ({})", a.steps, a.warmup);
  TESSERA_CHECK(a.trial_timeout > 0, "--trial-timeout must be > 0 (got {})", a.trial_timeout);
  TESSERA_CHECK(a.max_memory_gb >= 0, "--max-memory-gb must be >= 0 (got {})", a.max_memory_gb);
  tune::TuneRequest r;
  r.trial.launcher = tune::split_words(a.launcher);
  const std::vector<std::string>& launcher = r.trial.launcher;
  TESSERA_CHECK(launcher.empty() || runnable(launcher[0]),
                "--launcher: '{}' is not a program that can be run", launcher.empty() ? "" : launcher[0]);
  r.ranks = a.ranks > 0 ? a.ranks : std::max<int64_t>(launcher_ranks(launcher), 1);
  TESSERA_CHECK(r.ranks >= 1 && r.ranks <= 65536, "--ranks must be in [1, 65536] (got {})", r.ranks);

  r.config = a.config;
  r.base = read_planned_run(a.config);
  r.system = plan::load_system(a.system);
  // The trials correct the scale of another machine's numbers, not their
  // shape: say so before the first, uncorrected, proposal.
  for (const std::string& w : plan::calibration_file_warnings(r.system, plan::cpu_name()))
    fmt::print(stderr, "warning: {}\n", w);
  if (a.max_memory_gb > 0) r.system.memory_bytes = a.max_memory_gb * 1e9 + r.system.reserved_bytes;
  r.max_memory_gb = a.max_memory_gb;
  r.budget_trials = a.budget_trials;
  r.budget_seconds = a.budget_seconds;
  r.include = a.include;
  r.resume = !a.resume.empty();
  r.log = r.resume          ? a.resume
          : !a.log.empty()  ? a.log
                            : (std::filesystem::path(a.work_dir) / "tune.jsonl").string();
  r.output = a.output;
  r.trial.tessera = self_binary();
  r.trial.steps = a.steps;
  r.trial.warmup = a.warmup;
  r.trial.timeout = a.trial_timeout;
  r.trial.max_memory = a.max_memory_gb * 1e9;
  r.trial.dir = a.work_dir;
  const tune::TuneResult result = tune::run_trials(r);
  const std::vector<Trial>& trials = result.trials;

  fmt::print("\n{}", trials_table(trials));
  const tune::Correction final_corr = tune::correct_system(r.system, trials, a.warmup);
  fmt::print(
      "planner error on the ok trials: {:.1f} % uncorrected, {:.1f} % corrected from the trials "
      "before each (in-sample after all {}: {:.1f} %)\n",
      100 * tune::mean_error(trials, &Trial::predicted_before),
      100 * tune::mean_error(trials, &Trial::predicted_after), final_corr.trials,
      100 * tune::in_sample_error(r.base.model, final_corr.system, trials));
  const Trial* best = tune::best_trial(trials);
  TESSERA_CHECK(best, "tune: none of the {} trial(s) ran ({} new); see {}", trials.size(),
                trials.size() - result.first_new, r.log);
  fmt::print("best: trial {}: {} at {} ms/step\n", best->index, best->layout.str(),
             tune::ms_text(best->measured));
  const bridge::TrainKeys keys = tune::run_keys_with_layout(a.config, best->layout);
  fmt::print("{}", bridge::train_command(keys));
  if (!a.output.empty()) {
    write_output_file(a.output,
                      bridge::train_config_toml(
                          keys, fmt::format("tessera tune: trial {} of {}, {} on {} rank(s), {} "
                                            "ms/step measured",
                                            best->index, trials.size(), best->layout.str(),
                                            r.ranks, tune::ms_text(best->measured))),
                      "--output");
    fmt::print("wrote {}\n", a.output);
  }
  fmt::print("trial log: {}\n", r.log);
}

}  // namespace

void register_tune(CLI::App& app) {
  auto a = std::make_shared<TuneArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tune", "search layouts by real short trials, guided by the planner and corrected by them");
  cmd->add_option("--config", a->config, "the run to tune: a tessera train --config file")
      ->required();
  cmd->add_option("--budget-trials", a->budget_trials, "trials to run (default 8)");
  cmd->add_option("--budget-seconds", a->budget_seconds, "stop starting trials after this long");
  // 20 steps: on this 2-core machine the median of five measured steps
  // spread 8 % between repeats of one layout on 2 ranks, of seventeen 3 %.
  cmd->add_option("--steps", a->steps, "training steps per trial (default 20)");
  cmd->add_option("--warmup", a->warmup, "first steps of a trial left out of its time (default 3)");
  cmd->add_option("--launcher", a->launcher,
                  "how a trial is launched, e.g. \"scripts/mpirun.sh -n 4\" or \"srun\" "
                  "(default: one process, no launcher)");
  cmd->add_option("--ranks", a->ranks, "ranks a trial runs on (default: the launcher's -n)");
  cmd->add_option("--system", a->system, "the planner's system (default: local)");
  cmd->add_option("--max-memory-gb", a->max_memory_gb,
                  "memory a rank may use: the planner skips layouts over it and a trial that "
                  "measures over it fails");
  cmd->add_option("--trial-timeout", a->trial_timeout, "seconds before a trial is killed (300)");
  cmd->add_option("--include", a->include,
                  "a layout to try first, as tessera train flags (repeatable)");
  cmd->add_option("--output", a->output, "write the best layout as a tessera train --config file");
  cmd->add_option("--log", a->log, "the JSON-lines trial log (default WORK_DIR/tune.jsonl)");
  cmd->add_option("--resume", a->resume, "continue the trials of this log, appending to it");
  cmd->add_option("--work-dir", a->work_dir, "where the trials' files go (default tune-runs)");
  cmd->callback([a] { run_tune(*a); });
}

}  // namespace tessera::cli

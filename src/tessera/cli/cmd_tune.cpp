// `tessera tune`: the study's layout search run for real. The planner
// proposes, a short `tessera train` trial measures, the planner's system is
// corrected from the measurement (tune_model.h), and the next trial is the
// untried layout with the largest expected improvement under the corrected
// model (most_promising): a planner good to ~15 % ranks right what matters
// (memory, bubbles, communication volume) and is wrong by factors the trials
// measure (kernel speeds in situ, the network), so its corrected prediction
// is the mean, and its remaining error, larger for layouts unlike any tried,
// the spread.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "tessera/cli/commands.h"
#include "tessera/cli/config_file.h"
#include "tessera/bridge/run_plan.h"
#include "tessera/cli/train_run.h"
#include "tessera/core/error.h"
#include "tessera/core/output_file.h"
#include "tessera/plan/calibrate_run.h"
#include "tessera/plan/report.h"
#include "tessera/tune/tune_model.h"
#include "tessera/tune/tune_trial.h"

namespace tessera::cli {

using namespace tune;
using bridge::TrainKey;
using bridge::TrainKeys;
using bridge::layout_keys;
using bridge::layout_of_run;
using bridge::non_layout_keys_of_file;
using bridge::train_command;
using bridge::train_config_toml;

namespace {

struct TuneArgs {
  std::string config, launcher, system = "local", output, log, resume, work_dir = "tune-runs";
  int64_t budget_trials = 8, steps = 20, warmup = 3, ranks = 0;
  double budget_seconds = 0, max_memory_gb = 0, trial_timeout = 300;
  std::vector<std::string> include;
};

using Clock = std::chrono::steady_clock;

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

std::string ms(double s) { return s < 0 ? "-" : fmt::format("{:.1f}", s * 1e3); }

std::vector<Trial> read_log(const std::string& path) {
  std::ifstream in(path);
  TESSERA_CHECK(in.good(), "--resume {}: cannot read it", path);
  std::vector<Trial> out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail("--resume {} line {}: not JSON ({})", path, n, e.what());
    }
    out.push_back(trial_from_json(j, fmt::format("--resume {} line {}", path, n)));
  }
  return out;
}

void append_log(const std::string& path, const Trial& t) {
  std::ofstream out(path, std::ios::app);
  out << trial_to_json(t).dump() << "\n";
  out.flush();
  TESSERA_CHECK(out.good(), "--log {}: cannot append the trial (disk full?)", path);
}

// One row per trial within 100 columns; why each trial that did not run
// well failed, below the table.
std::string trials_table(const std::vector<Trial>& trials) {
  std::string out = fmt::format("{:>3}  {:<50} {:>9} {:>9} {:>9}  {}\n", "#", "layout",
                                "plan ms", "corr ms", "meas ms", "status");
  std::string why;
  for (const Trial& t : trials) {
    out += fmt::format("{:>3}  {:<50} {:>9} {:>9} {:>9}  {}\n", t.index, t.layout.str(),
                       ms(t.predicted_before), ms(t.predicted_after),
                       t.ok() ? ms(t.measured) : "-", t.status);
    if (!t.ok()) why += fmt::format("trial {} {}: {}\n", t.index, t.status, t.reason.substr(0, 200));
  }
  return out + why;
}


// Mean |predicted / measured - 1| over the ok trials the planner priced.
double mape(const std::vector<Trial>& trials, double Trial::*pred) {
  double sum = 0;
  int n = 0;
  for (const Trial& t : trials)
    if (t.ok() && t.*pred > 0) sum += std::abs(t.*pred / t.measured - 1), ++n;
  return n ? sum / n : -1;
}

void run_tune(const TuneArgs& a) {
  // Everything checked before the first trial.
  TESSERA_CHECK(a.budget_trials >= 1, "--budget-trials must be >= 1 (got {})", a.budget_trials);
  TESSERA_CHECK(a.budget_seconds >= 0, "--budget-seconds must be >= 0 (got {})", a.budget_seconds);
  TESSERA_CHECK(a.steps >= 2 && a.warmup >= 0 && a.warmup < a.steps,
                "--steps ({}) must be >= 2 and above --warmup ({})", a.steps, a.warmup);
  TESSERA_CHECK(a.trial_timeout > 0, "--trial-timeout must be > 0 (got {})", a.trial_timeout);
  TESSERA_CHECK(a.max_memory_gb >= 0, "--max-memory-gb must be >= 0 (got {})", a.max_memory_gb);
  const std::vector<std::string> launcher = split_words(a.launcher);
  TESSERA_CHECK(launcher.empty() || runnable(launcher[0]),
                "--launcher: '{}' is not a program that can be run", launcher.empty() ? "" : launcher[0]);
  const int64_t ranks = a.ranks > 0 ? a.ranks : std::max<int64_t>(launcher_ranks(launcher), 1);
  TESSERA_CHECK(ranks >= 1 && ranks <= 65536, "--ranks must be in [1, 65536] (got {})", ranks);

  const TrainConfig base = read_planned_run(a.config);
  plan::SystemSpec sys = plan::load_system(a.system);
  // The trials correct the scale of another machine's numbers, not their
  // shape: say so before the first, uncorrected, proposal.
  for (const std::string& w : plan::calibration_file_warnings(sys, plan::cpu_name()))
    fmt::print(stderr, "warning: {}\n", w);
  if (a.max_memory_gb > 0) sys.memory_bytes = a.max_memory_gb * 1e9 + sys.reserved_bytes;
  plan::SearchSpace space;
  space.devices = ranks;
  space.global_batch = base.par.global_batch;
  space.engine = true;
  space.flash_attention = true;
  space.precision = base.precision();
  const plan::PlanLayout base_layout = layout_of_run(base);
  std::vector<plan::PlanLayout> includes;
  for (const std::string& f : a.include) includes.push_back(parse_layout_flags(f, ranks, base_layout));
  const std::vector<plan::LayoutCost> fitting = rank_layouts(base.model, sys, space);
  if (includes.empty() && fitting.empty())
    fail("tune: no layout of this model fits {} rank(s) on system '{}'{}", ranks, sys.name,
         a.max_memory_gb > 0 ? fmt::format(" within --max-memory-gb {}", a.max_memory_gb) : "");

  std::filesystem::create_directories(a.work_dir);
  const std::string log = !a.resume.empty() ? a.resume
                          : !a.log.empty()  ? a.log
                                            : (std::filesystem::path(a.work_dir) / "tune.jsonl").string();
  std::vector<Trial> trials;
  if (!a.resume.empty()) {
    trials = read_log(a.resume);
    fmt::print("resumed {} trial(s) from {}\n", trials.size(), a.resume);
  } else {
    check_output_file(log, "--log");
    write_output_file(log, "", "--log");  // a new, empty log (a device is only opened)
  }
  if (!a.output.empty()) check_output_file(a.output, "--output");
  std::set<std::string> tried;
  for (const Trial& t : trials) tried.insert(t.layout.str());

  TrialSettings s;
  s.launcher = launcher;
  s.tessera = self_binary();
  s.steps = a.steps;
  s.warmup = a.warmup;
  s.timeout = a.trial_timeout;
  s.max_memory = a.max_memory_gb * 1e9;
  s.dir = a.work_dir;

  // The trials this run will take: the budget, or fewer when fewer
  // layouts are left untried (an exhaustive pass gives a budget no space
  // reaches); the progress line's "of N" and its ETA count these.
  std::set<std::string> untried;
  for (const plan::LayoutCost& c : fitting)
    if (!tried.count(c.layout.str())) untried.insert(c.layout.str());
  for (const plan::PlanLayout& L : includes)
    if (!tried.count(L.str())) untried.insert(L.str());
  const int64_t planned = std::min(a.budget_trials, int64_t(untried.size()));

  const auto start = Clock::now();
  const size_t first_new = trials.size();
  for (int64_t k = 0; k < a.budget_trials; ++k) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (a.budget_seconds > 0 && elapsed >= a.budget_seconds) {
      fmt::print("--budget-seconds {} reached after {} trial(s)\n", a.budget_seconds, k);
      break;
    }
    const Correction corr = correct_system(sys, trials, a.warmup);
    Trial t;
    t.index = int64_t(trials.size()) + 1;
    bool found = false;
    while (!includes.empty() && !found) {
      t.layout = includes.front();
      includes.erase(includes.begin());
      found = !tried.count(t.layout.str());
    }
    if (!found) {
      const std::vector<plan::LayoutCost> ranked = rank_layouts(base.model, corr.system, space);
      if (const plan::LayoutCost* next = most_promising(ranked, trials, tried)) {
        t.layout = next->layout;
        found = true;
      }
    }
    if (!found) {
      fmt::print("every layout that fits has been tried\n");
      break;
    }
    tried.insert(t.layout.str());
    t.flags = layout_flags(t.layout);
    // The base file's settings with this layout's: a setting of the base
    // layout the candidate leaves out (sequence parallelism, virtual
    // stages) cannot leak into the trial.
    TrainKeys keys = non_layout_keys_of_file(a.config);
    for (const TrainKey& key : layout_keys(t.layout)) keys.push_back(key);
    t.config = (std::filesystem::path(a.work_dir) / fmt::format("trial_{:03d}.toml", t.index)).string();
    write_output_file(t.config,
                      train_config_toml(keys, fmt::format("tessera tune trial {}: {}", t.index,
                                                          t.layout.str())),
                      "--work-dir");
    t.predicted_before = predicted_step(base.model, sys, t.layout);
    t.predicted_after = predicted_step(base.model, corr.system, t.layout);
    fmt::print("trial {} of {}: {} (planned {} ms, corrected {} ms)\n", t.index,
               int64_t(first_new) + planned, t.layout.str(), ms(t.predicted_before),
               ms(t.predicted_after));
    std::fflush(stdout);
    run_trial(s, t);
    trials.push_back(t);
    append_log(log, t);
    const Trial* best = best_trial(trials);
    const double done = std::chrono::duration<double>(Clock::now() - start).count();
    const double eta = done / double(k + 1) * double(std::max<int64_t>(planned - k - 1, 0));
    fmt::print("  {} {}; best so far {} ms (trial {}); {:.0f} s, ETA {:.0f} s\n", t.status,
               t.ok() ? fmt::format("{} ms/step", ms(t.measured)) : t.reason,
               best ? ms(best->measured) : "-", best ? best->index : 0, done, eta);
    std::fflush(stdout);
  }

  fmt::print("\n{}", trials_table(trials));
  const Correction final_corr = correct_system(sys, trials, a.warmup);
  fmt::print(
      "planner error on the ok trials: {:.1f} % uncorrected, {:.1f} % corrected from the trials "
      "before each (in-sample after all {}: {:.1f} %)\n",
      100 * mape(trials, &Trial::predicted_before), 100 * mape(trials, &Trial::predicted_after),
      final_corr.trials, [&] {
        std::vector<Trial> in = trials;
        for (Trial& t : in) t.predicted_after = predicted_step(base.model, final_corr.system, t.layout);
        return 100 * mape(in, &Trial::predicted_after);
      }());
  const Trial* best = best_trial(trials);
  TESSERA_CHECK(best, "tune: none of the {} trial(s) ran ({} new); see {}", trials.size(),
                trials.size() - first_new, log);
  fmt::print("best: trial {}: {} at {} ms/step\n", best->index, best->layout.str(), ms(best->measured));
  TrainKeys keys = non_layout_keys_of_file(a.config);
  for (const TrainKey& k : layout_keys(best->layout)) keys.push_back(k);
  fmt::print("{}", train_command(keys));
  if (!a.output.empty()) {
    write_output_file(a.output,
                      train_config_toml(keys, fmt::format("tessera tune: trial {} of {}, {} on {} "
                                                          "rank(s), {} ms/step measured",
                                                          best->index, trials.size(),
                                                          best->layout.str(), ranks,
                                                          ms(best->measured))),
                      "--output");
    fmt::print("wrote {}\n", a.output);
  }
  fmt::print("trial log: {}\n", log);
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

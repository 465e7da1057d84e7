#include "tessera/tune/tune_trial.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/core.h>

#include "tessera/bridge/run_plan.h"
#include "tessera/config/field_json.h"
#include "tessera/config/parallel_fields.h"
#include "tessera/core/error.h"
#include "tessera/plan/run_metrics.h"
#include "tessera/train/exit_signals.h"
#include "tessera/train/run_fields.h"

namespace tessera::tune {

using bridge::layout_keys;
using bridge::run_of_layout;
using bridge::TrainKey;

namespace {

using Clock = std::chrono::steady_clock;

// The pids whose parent is this process (read from /proc/PID/stat).
std::vector<pid_t> own_children() {
  std::vector<pid_t> out;
  const std::string me = std::to_string(getpid());
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string line;
    if (!std::getline(in, line)) continue;  // gone meanwhile
    // After the command name (which may hold spaces and ')'): state, ppid.
    std::istringstream rest(line.substr(line.rfind(')') + 1));
    std::string state, ppid;
    if (rest >> state >> ppid && ppid == me) out.push_back(pid_t(std::stoll(name)));
  }
  return out;
}

// Ends whatever a trial left behind. run_trial makes this process the
// subreaper of its trials, so a trial process whose parent died (a
// launcher's helper, the ranks of a killed launcher, something in a process
// group or session of its own, out of reach of kill(-pgid)) is reparented
// here instead of to init: once the launcher is reaped, every child left is
// a leftover. Each round kills and reaps them; their own children are
// reparented here in turn and go in the next round.
void end_leftovers() {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < deadline) {
    const std::vector<pid_t> left = own_children();
    if (left.empty()) return;
    for (pid_t p : left) kill(p, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }
}

// Runs argv with stdout and stderr into `log` (a file, never a pipe: no
// reader can be kept waiting by a grandchild that still holds it), in its
// own process group so a launcher and every rank it started can be killed
// together. Returns the exit status (128 + signal for a signal), or -1 when
// killed at `timeout`. Either way, nothing the trial started outlives it
// (end_leftovers).
int run_with_timeout(const std::vector<std::string>& argv, const std::string& log, double timeout) {
#ifdef PR_SET_CHILD_SUBREAPER
  prctl(PR_SET_CHILD_SUBREAPER, 1);  // orphans of the trial come here (end_leftovers)
#endif
  const pid_t pid = fork();
  TESSERA_CHECK(pid >= 0, "tune: cannot start a trial: {}", std::strerror(errno));
  if (pid == 0) {
    unblock_exit_signals();  // tessera's main() blocked them in this thread; a launcher needs them
    setpgid(0, 0);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "error: cannot run '%s': %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);  // also here: no race with the child's own call
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout);
  int status = 0;
  bool timed_out = false;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (Clock::now() >= deadline) {
      // TERM first (scripts/mpirun.sh passes it to the ranks), SIGKILL to
      // the group after 2 s if the launcher is still there.
      timed_out = true;
      kill(-pid, SIGTERM);
      const auto hard = Clock::now() + std::chrono::seconds(2);
      while (waitpid(pid, &status, WNOHANG) != pid) {
        if (Clock::now() >= hard) {
          kill(-pid, SIGKILL);
          waitpid(pid, &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Ranks the launcher left behind (it failed while they ran) go too: its
  // process group, then anything elsewhere.
  kill(-pid, SIGKILL);
  end_leftovers();
  if (timed_out) return -1;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

// The trial's own error line: the first "error" line of its output, else
// its last non-empty line.
std::string error_line(const std::string& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("error", 0) == 0 || line.find(": error:") != std::string::npos) return line;
    last = line;
  }
  return last.empty() ? "no output" : last;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::string ms_text(double s) { return s < 0 ? "-" : fmt::format("{:.1f}", s * 1e3); }

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string layout_flags(const plan::PlanLayout& L) {
  std::string out;
  for (const TrainKey& k : layout_keys(L)) {
    if (k.key == flag_key(flag::global_batch)) continue;  // never varied (varies_in_trials)
    if (k.kind == TrainKey::Kind::Flag) {
      if (k.value == "true") out += (out.empty() ? "--" : " --") + k.key;
      continue;
    }
    out += fmt::format("{}--{} {}", out.empty() ? "" : " ", k.key, k.value);
  }
  return out;
}

plan::PlanLayout parse_layout_flags(const std::string& flags, int64_t ranks,
                                    const plan::PlanLayout& base) {
  plan::PlanLayout L = base;
  ParallelConfig& p = L.par;
  TrainConfig run = run_of_layout(base);  // the layout's fields of TrainConfig
  const std::vector<std::string> w = split_words(flags);
  for (size_t i = 0; i < w.size(); ++i) {
    const std::string& f = w[i];
    // One word of the flags: a layout field of ParallelConfig or TrainConfig
    // (the global batch is the base config's, never varied).
    auto apply = [&](const auto& field, auto& c) {
      if (field_is_switch(field)) return (void)field_from_text(field, c, "true");
      TESSERA_CHECK(i + 1 < w.size(), "--include '{}': {} needs a value", flags, f);
      const std::string& v = w[++i];
      TESSERA_CHECK(field_from_text(field, c, v), "--include '{}': {} needs an integer (got '{}')",
                    flags, f, v);
    };
    const auto* pf = f == flag::global_batch ? nullptr : find_field(parallel_fields(), f);
    const auto* rf = find_field(run_fields(), f);
    if (pf && pf->on(kSurfaceLayout)) apply(*pf, p);
    else if (rf && rf->on(kSurfaceLayout)) apply(*rf, run);
    else fail("--include '{}': '{}' is not a layout flag of tessera train", flags, f);
  }
  L.overlap_grad_reduce = run.overlap_grad_reduce;
  L.overlap_param_gather = run.overlap_param_gather;
  // dp = ranks / (tp x cp x pp), divided one degree at a time (no product
  // of the flags' values to overflow); 0 when a degree is not >= 1 or does
  // not divide what is left.
  p.dp = ranks;
  for (int64_t d : {p.tp, p.cp, p.pp}) p.dp = d > 0 && p.dp % d == 0 ? p.dp / d : 0;
  return L;
}

namespace {

// A trial line holds every key (a missing one is not a trial of tessera
// tune), except the uneven stages', which logs written before they were
// searched lack; 0 is an even split. Ranges are not checked: a trial of an
// impossible layout is logged as it was asked for (dp 0 when ranks do not
// divide).
constexpr JsonForm kTrialForm{.every_key_required = true, .unset_as_zero = true,
                              .check_ranges = false};

}  // namespace

nlohmann::json trial_to_json(const Trial& t) {
  nlohmann::json j = {{"trial", t.index},
                      {"layout", t.layout.str()},
                      {"flags", t.flags},
                      {"precision", precision_name(t.layout.precision)},
                      {"predicted_before", t.predicted_before},
                      {"predicted_after", t.predicted_after},
                      {"status", t.status},
                      {"reason", t.reason},
                      {"measured", t.measured},
                      {"memory", t.memory},
                      {"seconds", t.seconds},
                      {"config", t.config},
                      {"metrics", t.metrics},
                      {"log", t.log}};
  fields_to_json(parallel_fields(), kSurfaceTrial, t.layout.par, kTrialForm, j);
  fields_to_json(run_fields(), kSurfaceTrial, run_of_layout(t.layout), kTrialForm, j);
  return j;
}

Trial trial_from_json(const nlohmann::json& j, const std::string& where) {
  Trial t;
  try {
    t.index = j.at("trial").get<int64_t>();
    // A line holds "cp" and "cp_comm" only for a cp > 1 trial (their fields'
    // `stored`), as every log written before tune tried cp: absent, cp 1.
    // (j is an object: at("trial") above threw otherwise.)
    nlohmann::json with_cp = j;
    if (!with_cp.contains("cp")) with_cp["cp"] = 1;
    if (!with_cp.contains("ep")) with_cp["ep"] = 1;  // likewise ep (a trial of ep > 1 holds it)
    if (!with_cp.contains("cp_comm")) with_cp["cp_comm"] = cp_comm_name(CpCommType::P2p);
    fields_from_json(parallel_fields(), kSurfaceTrial, with_cp, kTrialForm, "trial", t.layout.par);
    TrainConfig run;
    fields_from_json(run_fields(), kSurfaceTrial, j, kTrialForm, "trial", run);
    t.layout.overlap_grad_reduce = run.overlap_grad_reduce;
    t.layout.overlap_param_gather = run.overlap_param_gather;
    // "mixed16": a log written before the planner told bf16 from fp16
    // (the tuner's trials of a 16-bit run were --bf16 ones then).
    const std::string precision = j.at("precision").get<std::string>();
    if (precision == "mixed16") t.layout.precision = Precision::Bf16;
    else if (!precision_parse(precision, t.layout.precision))
      fail("precision '{}' is not fp32, bf16 or fp16", precision);
    t.layout.engine = true;
    t.flags = j.at("flags").get<std::string>();
    t.predicted_before = j.at("predicted_before").get<double>();
    t.predicted_after = j.at("predicted_after").get<double>();
    t.status = j.at("status").get<std::string>();
    t.reason = j.at("reason").get<std::string>();
    t.measured = j.at("measured").get<double>();
    t.memory = j.at("memory").get<double>();
    t.seconds = j.at("seconds").get<double>();
    t.config = j.at("config").get<std::string>();
    t.metrics = j.at("metrics").get<std::string>();
    t.log = j.at("log").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not a trial of tessera tune ({})", where, e.what());
  } catch (const Error& e) {
    fail("{}: {}", where, e.what());
  }
  return t;
}

void run_trial(const TrialSettings& s, Trial& t) {
  const std::string stem = (std::filesystem::path(s.dir) / fmt::format("trial_{:03d}", t.index)).string();
  t.metrics = stem + ".jsonl";
  t.log = stem + ".log";
  std::filesystem::remove(t.metrics);
  std::vector<std::string> argv = s.launcher;
  for (const std::string& w : {s.tessera, std::string("train"), std::string("--config"), t.config})
    argv.push_back(w);
  for (const std::string& w :
       {std::string("--train-iters"), std::to_string(s.steps), std::string("--metrics-file"),
        t.metrics, std::string("--eval-interval"), std::string("0"), std::string("--log-interval"),
        std::to_string(s.steps), std::string("--no-progress")})
    argv.push_back(w);
  const auto t0 = Clock::now();
  const int rc = run_with_timeout(argv, t.log, s.timeout);
  t.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (rc == -1) {
    t.status = "timeout";
    t.reason = fmt::format("killed after {:.0f} s (--trial-timeout)", s.timeout);
    return;
  }
  if (rc != 0) {
    t.status = "failed";
    t.reason = fmt::format("exit {}: {}", rc, error_line(t.log));
    return;
  }
  try {
    const plan::RunMetrics r = plan::read_run_metrics(t.metrics);
    TESSERA_CHECK(int64_t(r.step_seconds.size()) > s.warmup,
                  "{} steps, none after the {} warm-up step(s)", r.step_seconds.size(), s.warmup);
    t.measured = median({r.step_seconds.begin() + s.warmup, r.step_seconds.end()});
    t.memory = r.memory ? r.memory->total() : 0.0;
  } catch (const Error& e) {
    t.status = "failed";
    t.reason = fmt::format("its metrics: {}", e.what());
    return;
  }
  if (s.max_memory > 0 && t.memory > s.max_memory) {
    t.status = "over-memory";
    t.reason = fmt::format("{:.3f} GB on the fullest rank > --max-memory-gb {:.3f}", t.memory / 1e9,
                           s.max_memory / 1e9);
    return;
  }
  t.status = "ok";
}

}  // namespace tessera::tune

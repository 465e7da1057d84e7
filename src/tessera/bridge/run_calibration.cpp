#include "tessera/bridge/run_calibration.h"

#include <fmt/core.h>
#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "tessera/bridge/run_plan.h"
#include "tessera/comm/local_communicator.h"
#include "tessera/core/error.h"
#include "tessera/core/output_file.h"
#include "tessera/plan/calibrate_run.h"

namespace tessera::bridge {

namespace fs = std::filesystem;

namespace {

// FNV-1a, 64 bits: a name for the run's shape that stays the same from one
// build to the next (std::hash need not).
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Everything the measured numbers depend on. Bump the leading version when
// what a run calibration measures changes, so old files are not reused.
std::string shape_key(const RunShape& r, int64_t threads) {
  const GPTConfig& m = r.model;
  return fmt::format(
      "v2|{}|ranks {}|threads {}|L {} C {} NH {} KV {} F {} T {} V {}|swiglu {} rms {} rope {} "
      "bias {} untied {}|mb {} tp {}{}",
      plan::cpu_name(), r.ranks, threads, m.num_layers, m.hidden_size, m.num_heads, m.kv_heads(),
      m.ffn(), m.seq_length, m.padded_vocab(r.tp), m.swiglu, m.rmsnorm(), m.rope(),
      m.add_bias_linear, m.untie_embeddings, r.micro_batch, r.tp,
      r.precision == Precision::Fp32 ? "" : fmt::format("|{}", precision_name(r.precision)));
}

int64_t threads_of(const RunShape& r) { return r.threads > 0 ? r.threads : default_threads(r.ranks); }

// OpenMP threads set for a scope and restored after it, also on a throw.
class ThreadsFor {
 public:
  explicit ThreadsFor(int64_t n) : before_(omp_get_max_threads()) { omp_set_num_threads(int(n)); }
  ~ThreadsFor() { omp_set_num_threads(before_); }
  ThreadsFor(const ThreadsFor&) = delete;
  ThreadsFor& operator=(const ThreadsFor&) = delete;

 private:
  int before_;
};

// File descriptor 1 pointed at stderr for a scope and restored after it,
// also on a throw (buffered output flushed on both sides of the switch).
class StdoutToStderr {
 public:
  StdoutToStderr() : saved_((std::fflush(stdout), dup(1))) { dup2(2, 1); }
  ~StdoutToStderr() {
    std::fflush(stdout);
    dup2(saved_, 1);
    close(saved_);
  }
  StdoutToStderr(const StdoutToStderr&) = delete;
  StdoutToStderr& operator=(const StdoutToStderr&) = delete;

 private:
  int saved_;
};

}  // namespace

int64_t default_threads(int64_t ranks) {
  const int64_t cores = std::max<int64_t>(1, int64_t(std::thread::hardware_concurrency()));
  return std::max<int64_t>(1, cores / std::max<int64_t>(1, ranks));
}

std::string run_calibration_file(const RunShape& r) {
  const int64_t threads = threads_of(r);
  return (fs::path(plan::user_systems_dir()) / "runs" /
          fmt::format("local-{}x{}-{:016x}.toml", r.ranks, threads, fnv1a(shape_key(r, threads))))
      .string();
}

std::optional<plan::SystemSpec> run_calibration(const RunShape& r, std::string* advice) {
  const std::string file = run_calibration_file(r);
  const int64_t threads = threads_of(r);
  if (fs::exists(file)) {
    try {
      return plan::load_system_file(file);
    } catch (const Error& e) {
      // A damaged cache entry is measured again, not an error of the run.
      fmt::print(stderr, "run calibration {} does not load ({}); measuring again\n", file, e.what());
    }
  }
  // The model's shapes as a model file for calibrate (it reads models by
  // name): written in both cases, since the advised command names it.
  const std::string model_file = file.substr(0, file.size() - 5) + ".model.toml";
  write_output_file(model_file, train_config_toml(model_keys(r.model), "a run's model shape"),
                    "run calibration");
  if (r.ranks > 1) {
    if (advice) {
      // Wrapped: the cache paths alone take most of a 100-column line. The
      // wrapped command's final newline is dropped: advice is a message.
      *advice = fmt::format("no calibration of this run ({} rank(s) x {} thread(s), its shapes) "
                            "here; make it with:\n",
                            r.ranks, threads) +
                wrapped_command(fmt::format("scripts/mpirun.sh -n {} tessera calibrate", r.ranks),
                                {"--threads " + std::to_string(threads),
                                 "--model " + shell_word(model_file),
                                 "--micro-batch " + std::to_string(r.micro_batch),
                                 "--tp " + std::to_string(r.tp), "--output " + shell_word(file)});
      advice->pop_back();
    }
    return std::nullopt;
  }
  plan::CalibrateOptions o;
  o.models = {model_file};
  o.micro_batch = {r.micro_batch};
  o.tp = {r.tp};
  o.grid = false;  // only the run's shapes: what this plan prices
  o.passes = 3;
  o.lowp.clear();
  if (r.precision != Precision::Fp32) o.lowp.push_back(r.precision);
  fmt::print(stderr, "measuring this machine for the run (1 rank x {} threads, its shapes; "
                     "once, cached in {}):\n", threads, file);
  comm::LocalCommunicator world("calibration");
  plan::Calibration c;
  {
    const ThreadsFor threads_guard(threads);
    // calibrate_machine prints its progress on stdout: keep stdout for the
    // plan (--json -) by sending the progress to stderr meanwhile.
    const StdoutToStderr progress_guard;
    c = plan::calibrate_machine(world, o);
  }
  write_output_file(file, plan::calibration_toml(c), "run calibration");
  return plan::load_system_file(file);
}

void use_run_calibration(plan::SystemSpec& sys, const RunShape& run) {
  const char* env = std::getenv("TESSERA_RUN_CALIBRATION");
  if (env && std::string(env) == "0") return;
  std::string advice;
  std::optional<plan::SystemSpec> s;
  try {
    s = run_calibration(run, &advice);
  } catch (const Error& e) {
    // The cache is an aid: a directory that cannot be written (or a failed
    // measurement) leaves the shipped file in use, never fails the plan.
    advice = fmt::format("no run calibration ({}); pricing with the shipped system file", e.what());
  }
  if (s) {
    sys = *s;
    fmt::print(stderr, "system 'local': this run's calibration,\n  {}\n", run_calibration_file(run));
  } else {
    fmt::print(stderr, "note: {}\n", advice);
  }
}

}  // namespace tessera::bridge

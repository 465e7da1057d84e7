// `tessera calibrate`: measure this machine with the engine's own kernels
// (plan::calibrate_machine) and write a planner system file (by default
// local.toml in the user's cache, plan::user_systems_dir(), which `--system
// local` reads before the shipped configs/systems/local.toml; a tracked file
// is written only when --output names it), so that `tessera plan --system
// local` predicts what `tessera train` will measure. Run it under
// `scripts/mpirun.sh -n N` to measure N ranks at once and the network.
#include <fmt/core.h>
#include <omp.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>

#include "tessera/cli/collective_errors.h"
#include "tessera/cli/commands.h"
#include "tessera/cli/flag_checks.h"
#include "tessera/comm/mpi_runtime.h"
#include "tessera/core/error.h"
#include "tessera/core/output_file.h"
#include "tessera/plan/calibrate_run.h"
#include "tessera/plan/model_presets.h"

namespace tessera::cli {

namespace {

struct CalibrateArgs {
  std::string output;
  plan::CalibrateOptions measure;
  int threads = 0;
  std::vector<std::string> precisions{"bf16"};  // --precisions: measure.lowp by name
};

void run_calibrate(const CalibrateArgs& a) {
  comm::MpiRuntime rt(nullptr, nullptr);
  auto world = rt.world();
  const bool lead = world->rank() == 0;
  if (a.threads > 0) omp_set_num_threads(a.threads);
  // Bad input before a minute of measuring: the output must be writable and
  // every model must load, on every rank alike.
  agree(*world, [&] {
    for (const auto& m : a.measure.models) plan::load_model(m);
    if (!lead) return;
    check_output_file(a.output, "--output");
  });
  const plan::Calibration c = plan::calibrate_machine(*world, a.measure);
  // Rank 0 writes; agree() so that a failure there (the file does not load
  // back) ends every rank instead of leaving the others in a barrier.
  agree(*world, [&] {
    if (!lead) return;
    OutputFile out(a.output, "--output");
    out.write(plan::calibration_toml(c));
    if (out.atomic()) plan::load_system_file(out.staging());  // what was written must load
    out.commit();
    fmt::print("peak sgemm {:.1f} GFLOP/s; wrote {} in {:.0f} s\n", c.peak_gemm / 1e9, a.output,
               c.seconds);
  });
}

}  // namespace

void register_calibrate(CLI::App& app) {
  auto a = std::make_shared<CalibrateArgs>();
  a->output = plan::user_systems_dir() + "/local.toml";
  a->measure.models = {plan::config_dir() + "/models/tiny-local.toml"};
  auto* cmd = app.add_subcommand(
      "calibrate",
      "measure this machine (GEMMs, memory bandwidth, attention, MPI) and write a planner "
      "system file; run under scripts/mpirun.sh -n 2 to measure the network too");
  cmd->add_option("--output", a->output, "system file to write")->capture_default_str();
  cmd->add_option("--model", a->measure.models, "models whose training GEMMs to measure (presets or .toml)")
      ->capture_default_str();
  cmd->add_option("--micro-batch", a->measure.micro_batch, "micro-batch sizes to measure")
      ->capture_default_str();
  cmd->add_option("--tp", a->measure.tp, "tensor-parallel degrees to measure")->capture_default_str();
  cmd->add_option("--max-gflop", a->measure.max_gflop,
                  "skip coarse-grid GEMMs larger than this (the models' own shapes are always "
                  "measured)")
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "threads per rank (default: OpenMP's)");
  cmd->add_flag("--quick", a->measure.quick, "fewer shapes and shorter timings, one pass (tests)");
  cmd->add_option("--precisions", a->precisions,
                  "16-bit GEMM precisions measured beside fp32, each with its own in-situ step "
                  "(bf16 fp16; 'none' for fp32 only)")
      ->capture_default_str();
  cmd->add_option("--passes", a->measure.passes,
                  "interleaved passes over every measurement, each taking the median over them "
                  "(a shared machine's speed drifts)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  cmd->callback([a] {
    CalibrateArgs args = *a;
    plan::CalibrateOptions& m = args.measure;
    check_threads(args.threads);
    for (int64_t b : m.micro_batch)
      TESSERA_CHECK(b >= 1 && b <= 4096, "--micro-batch must be in [1, 4096] (got {})", b);
    for (int64_t t : m.tp) TESSERA_CHECK(t >= 1 && t <= 4096, "--tp must be in [1, 4096] (got {})", t);
    TESSERA_CHECK(std::isfinite(m.max_gflop) && m.max_gflop > 0,
                  "--max-gflop must be a finite number > 0 (got {})", m.max_gflop);
    if (m.quick) m.micro_batch = {m.micro_batch.front()}, m.tp = {1};
    m.lowp.clear();
    for (const std::string& name : args.precisions) {
      if (name == "none" && args.precisions.size() == 1) break;
      Precision p = Precision::Fp32;
      TESSERA_CHECK(precision_parse(name, p) && p != Precision::Fp32,
                    "--precisions: bf16, fp16 or none (got '{}')", name);
      m.lowp.push_back(p);
    }
    run_calibrate(args);
  });
}

}  // namespace tessera::cli

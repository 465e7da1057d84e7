// `tessera bench`: measurements of this machine that other commands read.
#include <fmt/core.h>

#include <memory>

#include "tessera/cli/commands.h"
#include "tessera/cli/flag_checks.h"
#include "tessera/core/output_file.h"
#include "tessera/train/peak.h"

namespace tessera::cli {

void register_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "measure this machine");
  bench->require_subcommand(1);

  auto* peak = bench->add_subcommand(
      "peak", "measure fp32 GEMM throughput (the peak `tessera train` divides by for MFU)");
  auto output = std::make_shared<std::string>(default_peak_file());
  auto threads = std::make_shared<int>(0);
  peak->add_option("--output", *output, "where to write the result (JSON)")->capture_default_str();
  peak->add_option("--threads", *threads, "threads (default: OpenMP's, usually all cores)");
  peak->callback([output, threads] {
    check_threads(*threads);
    // The measurement takes a while: a path that cannot be written fails first.
    check_output_file(*output, "--output");
    double t = measure_and_write_peak(*output, *threads, true);
    fmt::print("peak fp32 GEMM: {:.1f} GFLOP/s, written to {}\n", t * 1e3, *output);
  });
}

}  // namespace tessera::cli

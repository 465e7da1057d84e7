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
      "peak",
      "measure GEMM throughput (the ceiling `tessera train` reports its share of), fp32 or, with "
      "--bf16 / --fp16, the 16-bit GEMM");
  auto output = std::make_shared<std::string>(default_peak_file());
  auto threads = std::make_shared<int>(0);
  auto bf16 = std::make_shared<bool>(false);
  auto fp16 = std::make_shared<bool>(false);
  peak->add_option("--output", *output, "where to write the result (JSON)")->capture_default_str();
  peak->add_option("--threads", *threads, "threads (default: OpenMP's, usually all cores)");
  auto* bf = peak->add_flag("--bf16", *bf16, "measure the bf16 GEMM (what --bf16 runs compare with)");
  peak->add_flag("--fp16", *fp16, "measure the fp16 GEMM (what --fp16 runs compare with)")
      ->excludes(bf);
  peak->callback([output, threads, bf16, fp16] {
    check_threads(*threads);
    // The measurement takes a while: a path that cannot be written fails first.
    check_output_file(*output, "--output");
    const Precision p = *bf16 ? Precision::Bf16 : *fp16 ? Precision::Fp16 : Precision::Fp32;
    double t = measure_and_write_peak(*output, *threads, true, p);
    fmt::print("peak {} GEMM: {:.1f} GFLOP/s, written to {}\n", precision_name(p), t * 1e3,
               *output);
  });
}

}  // namespace tessera::cli

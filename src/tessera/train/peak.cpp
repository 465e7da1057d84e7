#include "tessera/train/peak.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/core/output_file.h"
#include "tessera/kernels/cpu_peak.h"
#include "tessera/kernels/gemm_peak.h"

namespace tessera {

std::string default_peak_file() {
  if (const char* p = std::getenv("TESSERA_PEAK_FILE")) return p;
  if (const char* x = std::getenv("XDG_CACHE_HOME")) return std::string(x) + "/tessera/peak.json";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/tessera/peak.json";
}

Peak resolve_peak(double stated_tflops, const std::string& file, int64_t cores, Precision p) {
  Peak peak;
  if (stated_tflops > 0) {
    peak.tflops = stated_tflops;
    peak.source = "stated by --peak-tflops";
  } else {
    const kernels::CpuPeak cpu = kernels::cpu_theoretical_peak(cores, p);
    peak.tflops = cpu.tflops;
    peak.source = "theoretical: " + cpu.description;
  }
  std::ifstream in(file);
  if (!in) {
    peak.gemm_source = "not measured: run `tessera bench peak` to measure it";
    return peak;
  }
  nlohmann::json j;
  try {
    in >> j;
    double t = j.at("fp32_gemm_tflops").get<double>();
    TESSERA_CHECK(t > 0, "peak file {}: fp32_gemm_tflops must be > 0", file);
    peak.gemm_tflops = t;
    peak.gemm_source = fmt::format("measured by `tessera bench peak` ({} threads, {})",
                                   j.value("threads", 0), file);
    return peak;
  } catch (const nlohmann::json::exception& e) {
    fail("peak file {} is not a valid `tessera bench peak` result: {}", file, e.what());
  }
}

static double measure(bool verbose, nlohmann::json& results) {
  // Shapes like the GEMMs of a training step: square and the tall-skinny
  // (tokens x hidden) x (hidden x 4 hidden) kind.
  const int64_t shapes[][3] = {{1024, 1024, 1024}, {2048, 2048, 2048}, {1024, 3072, 768},
                               {2048, 4096, 1024}};
  // A peak is the ceiling: the best of a few warm repeats (kernels/gemm_peak.h).
  const kernels::GemmTiming best_of_five{.min_reps = 5, .min_seconds = 0, .cold_caches = false};
  double best = 0;
  for (auto& s : shapes) {
    const int64_t M = s[0], N = s[1], K = s[2];
    const kernels::GemmShape shape{.M = M, .N = N, .K = K};
    const std::vector<double> t = kernels::gemm_fp32_seconds(shape, best_of_five);
    const double tflops = shape.flops() / *std::min_element(t.begin(), t.end()) / 1e12;
    best = std::max(best, tflops);
    results.push_back({{"m", M}, {"n", N}, {"k", K}, {"tflops", tflops}});
    if (verbose) fmt::print("sgemm {:>5} x {:>5} x {:>5}: {:8.1f} GFLOP/s\n", M, N, K, tflops * 1e3);
  }
  return best;
}

double measure_gemm_peak(bool verbose) {
  nlohmann::json results = nlohmann::json::array();
  return measure(verbose, results);
}

double measure_and_write_peak(const std::string& file, int threads, bool verbose) {
  if (threads > 0) omp_set_num_threads(threads);
  const int used = omp_get_max_threads();
  nlohmann::json results = nlohmann::json::array();
  const double best = measure(verbose, results);
  nlohmann::json j = {{"fp32_gemm_tflops", best}, {"threads", used},
                      {"measured_at", std::time(nullptr)}, {"shapes", results}};
  write_output_file(file, j.dump(2) + "\n", "peak file");
  return best;
}

}  // namespace tessera

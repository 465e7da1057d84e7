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
#include "tessera/kernels/cpu_backend_info.h"
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
  // A 16-bit run is compared with the 16-bit GEMM's ceiling, not fp32's:
  // its GEMMs run up to twice as fast, so the fp32 figure would flatter it.
  const std::string key = gemm_peak_key(p);
  const std::string command =
      p == Precision::Fp32 ? "tessera bench peak" : fmt::format("tessera bench peak --{}", precision_name(p));
  std::ifstream in(file);
  const std::string not_measured = fmt::format("not measured: run `{}` to measure it", command);
  if (!in) {
    peak.gemm_source = not_measured;
    return peak;
  }
  nlohmann::json j;
  try {
    in >> j;
    if (!j.contains(key)) {
      peak.gemm_source = not_measured;
      return peak;
    }
    double t = j.at(key).get<double>();
    TESSERA_CHECK(t > 0, "peak file {}: {} must be > 0", file, key);
    peak.gemm_tflops = t;
    // Each precision's thread count (older files: one "threads" for fp32).
    const int threads = j.value(std::string(precision_name(p)) + "_threads", j.value("threads", 0));
    peak.gemm_source = fmt::format("measured by `{}` ({} threads, {})", command, threads, file);
    return peak;
  } catch (const nlohmann::json::exception& e) {
    fail("peak file {} is not a valid `tessera bench peak` result: {}", file, e.what());
  }
}

std::string gemm_peak_key(Precision p) {
  return std::string(precision_name(p)) + "_gemm_tflops";
}

static double measure(bool verbose, Precision p, nlohmann::json& results) {
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
    // 16-bit: the same shapes, as the forward GEMM of a linear ('N','T'),
    // the role most of a step's 16-bit GEMM time is spent in.
    const std::vector<double> t =
        p == Precision::Fp32
            ? kernels::gemm_fp32_seconds(shape, best_of_five)
            : kernels::gemm_linear_seconds(kernels::cpu_backend(), p,
                                           {.M = M, .N = N, .K = K, .ta = 'N', .tb = 'T'},
                                           best_of_five);
    const double tflops = shape.flops() / *std::min_element(t.begin(), t.end()) / 1e12;
    best = std::max(best, tflops);
    results.push_back({{"m", M}, {"n", N}, {"k", K}, {"tflops", tflops}});
    if (verbose)
      fmt::print("{} gemm {:>5} x {:>5} x {:>5}: {:8.1f} GFLOP/s\n", precision_name(p), M, N, K,
                 tflops * 1e3);
  }
  return best;
}

double measure_gemm_peak(bool verbose, Precision p) {
  nlohmann::json results = nlohmann::json::array();
  return measure(verbose, p, results);
}

double measure_and_write_peak(const std::string& file, int threads, bool verbose, Precision p) {
  if (threads > 0) omp_set_num_threads(threads);
  const int used = omp_get_max_threads();
  nlohmann::json results = nlohmann::json::array();
  const double best = measure(verbose, p, results);
  // One file for every precision: keep what an earlier run measured for the
  // others (a file that does not parse as an object is replaced).
  nlohmann::json j = nlohmann::json::object();
  if (std::ifstream in(file); in) {
    try {
      in >> j;
    } catch (const nlohmann::json::exception&) {
    }
    if (!j.is_object()) j = nlohmann::json::object();
  }
  const std::string name = precision_name(p);
  j[gemm_peak_key(p)] = best;
  j[name + "_threads"] = used;
  j[name + "_shapes"] = results;
  j["measured_at"] = std::time(nullptr);
  if (p == Precision::Fp32) {  // the fields older readers take
    j["threads"] = used;
    j["shapes"] = results;
  }
  write_output_file(file, j.dump(2) + "\n", "peak file");
  return best;
}

}  // namespace tessera

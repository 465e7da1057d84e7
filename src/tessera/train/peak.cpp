#include "tessera/train/peak.h"

#include <dnnl.h>
#include <omp.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "tessera/core/buffer.h"
#include "tessera/core/error.h"
#include "tessera/core/timer.h"

namespace tessera {

std::string default_peak_file() {
  if (const char* p = std::getenv("TESSERA_PEAK_FILE")) return p;
  if (const char* x = std::getenv("XDG_CACHE_HOME")) return std::string(x) + "/tessera/peak.json";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/tessera/peak.json";
}

Peak resolve_peak(double stated_tflops, const std::string& file) {
  if (stated_tflops > 0)
    return {stated_tflops, fmt::format("stated by --peak-tflops")};
  std::ifstream in(file);
  if (!in) return {0, fmt::format("unknown: run `tessera bench peak` to measure it")};
  nlohmann::json j;
  try {
    in >> j;
    double t = j.at("fp32_gemm_tflops").get<double>();
    TESSERA_CHECK(t > 0, "peak file {}: fp32_gemm_tflops must be > 0", file);
    return {t, fmt::format("measured by `tessera bench peak` ({} threads, {})",
                           j.value("threads", 0), file)};
  } catch (const nlohmann::json::exception& e) {
    fail("peak file {} is not a valid `tessera bench peak` result: {}", file, e.what());
  }
}

static double measure(bool verbose, nlohmann::json& results) {
  // Shapes like the GEMMs of a training step: square and the tall-skinny
  // (tokens x hidden) x (hidden x 4 hidden) kind.
  const int64_t shapes[][3] = {{1024, 1024, 1024}, {2048, 2048, 2048}, {1024, 3072, 768},
                               {2048, 4096, 1024}};
  double best = 0;
  for (auto& s : shapes) {
    const int64_t M = s[0], N = s[1], K = s[2];
    Buffer a(M * K), b(K * N), c(M * N);
    for (int64_t i = 0; i < M * K; ++i) a.f32()[i] = float(i % 7) * 0.1f;
    for (int64_t i = 0; i < K * N; ++i) b.f32()[i] = float(i % 5) * 0.1f;
    auto run = [&] {
      // The engine's own GEMM library (see kernels/cpu/matmul.cpp).
      dnnl_sgemm('N', 'N', M, N, K, 1.0f, a.f32(), K, b.f32(), N, 0.0f, c.f32(), N);
    };
    run();  // warm-up: page faults, thread start
    double best_s = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      Stopwatch sw;
      run();
      best_s = std::min(best_s, sw.elapsed());
    }
    double tflops = 2.0 * double(M) * double(N) * double(K) / best_s / 1e12;
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
  std::filesystem::path p(file);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(file);
  TESSERA_CHECK(bool(out), "cannot write peak file {}", file);
  out << j.dump(2) << "\n";
  return best;
}

}  // namespace tessera

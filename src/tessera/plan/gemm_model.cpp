#include "tessera/plan/gemm_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera::plan {

namespace {

double ceil_div(int64_t a, int64_t b) { return double((a + b - 1) / b); }

// Roofline with tiling: the device computes output tiles of tile_m x tile_n
// in waves over its compute units. Partial edge tiles, a last partial wave
// and a short k loop all waste issue slots; memory traffic bounds small k.
// peak, max_efficiency: the precision's (FP8 its own); elt: operand bytes.
double roofline_seconds(const SystemSpec& sys, double peak, double max_efficiency, double elt,
                        const GemmShape& g) {
  const double tiles_m = ceil_div(g.m, sys.tile_m), tiles_n = ceil_div(g.n, sys.tile_n);
  const double edge = (double(g.m) / (tiles_m * double(sys.tile_m))) *
                      (double(g.n) / (tiles_n * double(sys.tile_n)));
  const double tiles = tiles_m * tiles_n * double(g.batch);
  const double units = double(std::max<int64_t>(1, sys.compute_units));
  const double waves = std::ceil(tiles / units);
  const double wave_fill = tiles / (waves * units);
  // The k loop's prologue/epilogue: ~64 k-steps' worth of fixed cost per tile.
  const double k_fill = double(g.k) / (double(g.k) + 64.0);
  const double eff = max_efficiency * edge * wave_fill * k_fill;
  const double compute = g.flops() / (peak * std::max(eff, 1e-3));
  const double bytes = elt * double(g.batch) *
                       (double(g.m) * g.k + double(g.k) * g.n + double(g.m) * g.n);
  const double memory = bytes / sys.achieved_memory_bandwidth();
  return std::max(compute, memory);
}

// The measured sample nearest in log-shape; its achieved FLOP/s applies.
double measured_seconds(const std::vector<GemmSample>& samples, const GemmShape& g) {
  double best = std::numeric_limits<double>::max(), flops = 0;
  for (const auto& s : samples) {
    double d = std::pow(std::log(double(s.m) / double(g.m)), 2) +
               std::pow(std::log(double(s.n) / double(g.n)), 2) +
               std::pow(std::log(double(s.k) / double(g.k * 1)), 2);
    if (d < best) best = d, flops = s.flops;
  }
  return g.flops() / flops;
}

}  // namespace

double gemm_seconds(const SystemSpec& sys, Precision p, const GemmShape& g) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) return 0;
  const GemmShape rows{g.m * g.batch, g.n, g.k};
  // Each 16-bit precision its own measured kernels; without them the fp32
  // table (a CPU without 16-bit units computes them at fp32's rate).
  if (p == Precision::Bf16 && !sys.gemm_measured_bf16.empty())
    return measured_seconds(sys.gemm_measured_bf16, rows);
  if (p == Precision::Fp16 && !sys.gemm_measured_fp16.empty())
    return measured_seconds(sys.gemm_measured_fp16, rows);
  if (!sys.gemm_measured.empty()) return measured_seconds(sys.gemm_measured, rows);
  // At the clock the device sustains in training (SystemSpec::sustained_clock):
  // max_efficiency is a burst microbenchmark's fraction of the datasheet peak.
  return roofline_seconds(sys, sys.sustained_peak_flops(p), sys.gemm_max_efficiency,
                          double(activation_element_bytes(p)), g);
}

double gemm_seconds_fp8(const SystemSpec& sys, const GemmShape& g) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) return 0;
  const double eff =
      sys.gemm_max_efficiency_fp8 > 0 ? sys.gemm_max_efficiency_fp8 : sys.gemm_max_efficiency;
  return roofline_seconds(sys, sys.peak_flops_fp8 * sys.sustained_clock, eff, 1.0, g);
}

double gemm_efficiency(const SystemSpec& sys, Precision p, const GemmShape& g) {
  return g.flops() / (gemm_seconds(sys, p, g) * sys.peak_flops(p));
}

}  // namespace tessera::plan

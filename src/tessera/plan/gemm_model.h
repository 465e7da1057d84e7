// How fast one GEMM runs on a device: pluggable. The default is a roofline
// with tiling losses; a system file with measured samples (from `tessera
// calibrate`) uses the nearest measured shape instead.
#pragma once
#include <cstdint>

#include "tessera/plan/layout.h"
#include "tessera/plan/system.h"

namespace tessera::plan {

// C (m x n) = A (m x k) B (k x n), `batch` independent copies.
struct GemmShape {
  int64_t m = 1, n = 1, k = 1, batch = 1;
  double flops() const { return 2.0 * double(m) * double(n) * double(k) * double(batch); }
};

// Seconds for one GEMM.
double gemm_seconds(const SystemSpec& sys, Precision p, const GemmShape& g);
// The same GEMM with FP8 operands (1 byte each) at the device's FP8 peak and
// efficiency (SystemSpec::peak_flops_fp8; the device must have FP8 units).
double gemm_seconds_fp8(const SystemSpec& sys, const GemmShape& g);
// Achieved fraction of peak for that GEMM (for reports).
double gemm_efficiency(const SystemSpec& sys, Precision p, const GemmShape& g);

}  // namespace tessera::plan

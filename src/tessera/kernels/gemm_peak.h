// The one GEMM-rate measurement: the engine's own fp32 GEMM
// (kernels/cpu/matmul.cpp's sgemm) timed on a given shape with the current
// OpenMP thread count. `tessera bench peak` and the trainer's MFU
// (train/peak.cpp) take the best repeat of training-like shapes: the
// ceiling the machine reaches. The planner's calibration
// (plan/calibrate_compute.cpp) takes the median of repeats from cold
// private caches: what a GEMM inside a training step sees.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/kernels/precision.h"

namespace tessera::kernels {

class Backend;

// Row-major C (M, N) = op(A) op(B) + beta * C, op 'N' (as stored) or 'T'
// (transposed), with A, B, C stored as matmul.cpp stores them.
struct GemmShape {
  int64_t M = 0, N = 0, K = 0;
  char ta = 'N', tb = 'N';
  float beta = 0;  // 1: accumulate into C, as the weight gradient does
  double flops() const { return 2.0 * double(M) * double(N) * double(K); }
};

struct GemmTiming {
  int min_reps = 5;          // timed repeats, at least
  double min_seconds = 0;    // and at least this long in all (500 repeats at most)
  bool cold_caches = false;  // evict_private_caches() before each repeat
};

// Seconds of each timed repeat of one fp32 GEMM of `shape`, after one
// untimed warm-up (page faults, the library's kernel choice, thread start).
std::vector<double> gemm_fp32_seconds(const GemmShape& shape, const GemmTiming& timing);

// Seconds of each timed repeat of one GEMM of a linear layer on `backend`
// in `precision` (fp32, or 16-bit operands with fp32 accumulation and
// output), in the role the shape's transposes name, as matmul.cpp's sgemm
// calls map to the three GEMMs of a linear: 'N','T' forward
// (matmul_forward), 'N','N' input gradient and 'T','N' weight gradient
// (matmul_backward with only that output; beta 1: accumulated). Throws for
// another pair of transposes. What calibration times: any backend's GEMMs.
std::vector<double> gemm_linear_seconds(const Backend& backend, Precision precision,
                                        const GemmShape& shape, const GemmTiming& timing);
// Evicts the caches a core owns (L1, L2) by writing a buffer several times
// their size: in a training step a kernel's operands were last touched many
// kernels ago, so they arrive from the shared cache or memory, not L2.
void evict_private_caches();

}  // namespace tessera::kernels

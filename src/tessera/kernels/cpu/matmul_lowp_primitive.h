// One row-major GEMM on oneDNN's matmul primitive with 16-bit inputs and fp32
// accumulation: the building block of kernels/cpu/matmul_lowp.h.
//
// Creating a matmul primitive JIT-compiles a kernel (milliseconds), far more
// than a GEMM of a small layer takes, so primitives are made once per
// GemmSpec and kept for the life of the process. The cache is guarded by a
// mutex; a primitive itself is run from one thread at a time (the trainer's
// compute thread), with oneDNN's own OpenMP threads inside.
#pragma once
#include <compare>
#include <cstdint>
#include <string>

#include "tessera/core/dtype.h"

namespace tessera::cpu {

// C (M, N) = op(A) (M, K) @ op(B) (K, N) [+ bias (N)] , or C += that.
// Each matrix may be a block of a larger row-major one: lda / ldb / ldc are
// the row strides (in elements) of A, B, C as stored, 0 meaning dense (the
// stored width). A strided A makes oneDNN 2.6 pick its gemm-based matmul
// ("gemm:jit") instead of brgemm, which kernels/cpu/matmul_lowp.cpp uses on
// purpose for the weight gradient (docs/mixed_precision.md).
struct GemmSpec {
  Precision in = Precision::Bf16;   // A's and B's element type: BF16 or F16
  Precision out = Precision::Fp32;   // C's element type: F32, or the input type
  int64_t M = 0, N = 0, K = 0;
  bool a_trans = false;     // A is stored (K, M) row-major instead of (M, K)
  bool b_trans = false;     // B is stored (N, K) row-major instead of (K, N)
  bool bias = false;        // add an fp32 bias (N) to every row (not with accumulate)
  bool accumulate = false;  // C += op(A) @ op(B) (F32 output only)
  int64_t lda = 0, ldb = 0, ldc = 0;  // row strides as stored; 0: dense
  auto operator<=>(const GemmSpec&) const = default;
};

// Runs s on the given buffers, creating and caching its primitive on first
// use. Throws tessera::Error if oneDNN has no implementation for s.
void gemm_lowp(const GemmSpec& s, const void* A, const void* B, const float* bias, void* C);

// The oneDNN implementation that runs s ("brg:avx512_core_bf16", ...), or ""
// when there is none. Creates (and caches) the primitive.
std::string gemm_lowp_impl(const GemmSpec& s);

// The instruction set oneDNN dispatches to on this CPU ("avx512_core_bf16",
// "avx512_core_amx", ...), from dnnl_get_effective_cpu_isa.
std::string onednn_cpu_isa();

}  // namespace tessera::cpu

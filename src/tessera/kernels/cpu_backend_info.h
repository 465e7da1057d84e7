// The CPU backend as the rest of the program reaches it, without including
// kernels/cpu/: the process-wide instance, and what its kernels tell the
// planner and the log about themselves.
#pragma once
#include <cstdint>
#include <string>

#include "tessera/core/dtype.h"
#include "tessera/kernels/backend.h"

namespace tessera::kernels {

// The process-wide CPU backend (stateless; the kernels share OpenMP's pool).
const Backend& cpu_backend();

// The Philox draws of the CPU attention's probability-dropout mask per
// sequence and query head in one forward or one backward call (T tokens):
// the kernels draw a whole (row group, key tile) of bits for every tile on
// and under the causal diagonal, so the planner prices the mask by these
// draws (model/op_list.cpp) rather than by T^2/2.
int64_t attention_dropout_draws(int64_t T, bool forward);

// One line for the log: how this machine runs the GEMMs of a 16-bit type
// (BF16 or F16): oneDNN's matmul, or 16-bit storage with fp32 compute.
std::string lowp_gemm_path_description(Precision in);
// The oneDNN implementation of the bf16 forward GEMM at this shape
// ("brg:avx512_core_bf16", ...; "" if none), for the log.
std::string bf16_gemm_impl(int64_t N, int64_t C, int64_t OC);

}  // namespace tessera::kernels

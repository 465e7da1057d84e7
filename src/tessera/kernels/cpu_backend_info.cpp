#include "tessera/kernels/cpu_backend_info.h"

#include "tessera/kernels/cpu/attention.h"
#include "tessera/kernels/cpu/cpu_backend.h"
#include "tessera/kernels/cpu/matmul_lowp.h"

namespace tessera::kernels {

const Backend& cpu_backend() {
  static const CpuBackend backend;
  return backend;
}

int64_t attention_dropout_draws(int64_t T, bool forward) {
  return cpu::attention_dropout_draws(T, forward);
}

std::string lowp_gemm_path_description(Precision in) { return cpu::lowp_gemm_path_description(in); }

std::string bf16_gemm_impl(int64_t N, int64_t C, int64_t OC) {
  return cpu::bf16_gemm_impl(N, C, OC);
}

}  // namespace tessera::kernels

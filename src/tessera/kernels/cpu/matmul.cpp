#include "tessera/kernels/cpu/matmul.h"

#include <dnnl.h>

#include "tessera/core/error.h"
#include "tessera/kernels/cpu/bias.h"

namespace tessera::cpu {

// On oneDNN's sgemm, which picks its kernel from the CPU's instruction set
// (AVX-512, AVX2, ...) at run time rather than from a table of known CPU models.
void sgemm(char ta, char tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  dnnl_status_t st = dnnl_sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
  TESSERA_CHECK(st == dnnl_success, "oneDNN sgemm failed (status {}) for {}x{}x{}", int(st), M, N, K);
}

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    int64_t N, int64_t C, int64_t OC) {
  // out (N, OC) = inp (N, C) @ weight^T, weight (OC, C) row-major.
  sgemm('N', 'T', N, OC, C, inp, C, weight, C, 0.0f, out, OC);
  if (bias) bias_add(out, bias, N, OC);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int64_t N, int64_t C, int64_t OC,
                     bool accumulate_dinp, bool accumulate_dweight) {
  // dinp (N, C) = dout (N, OC) @ weight (OC, C)
  if (dinp)
    sgemm('N', 'N', N, C, OC, dout, OC, weight, C, accumulate_dinp ? 1.0f : 0.0f, dinp, C);
  // dweight (OC, C) += (or =) dout^T (OC, N) @ inp (N, C), skipped when null
  if (dweight)
    sgemm('T', 'N', OC, C, N, dout, OC, inp, C, accumulate_dweight ? 1.0f : 0.0f, dweight, C);
  if (dbias) bias_backward(dbias, dout, N, OC);
}

}  // namespace tessera::cpu

// The experts' GEMMs of an MoE layer (backend_methods.inc:
// grouped_matmul_*), defined on CpuBackend: each expert's group of rows is
// one call of this backend's own matmul on views into the stacked weights,
// so an expert computes the bits a dense MLP of its weights would.
#include "tessera/core/error.h"
#include "tessera/kernels/cpu/cpu_backend.h"

namespace tessera::kernels {

namespace {

// The view n elements past a's start, in a's element type.
ConstAct at(ConstAct a, int64_t n) {
  return a.lowp() ? ConstAct(a.u16() + n, a.dtype) : ConstAct(a.f32() + n);
}
Act at(Act a, int64_t n) { return a.lowp() ? Act(a.u16() + n, a.dtype) : Act(a.f32() + n); }

// Calls f(e, first row, rows) for each expert with rows, checking they fit in R.
template <class F>
void for_each_group(const int32_t* counts, int64_t R, int64_t E, const char* kernel, F f) {
  int64_t row = 0;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t rows = counts[e];
    TESSERA_CHECK(rows >= 0 && row + rows <= R, "{}: groups of more than {} rows", kernel, R);
    if (rows > 0) f(e, row, rows);
    row += rows;
  }
}

}  // namespace

void CpuBackend::grouped_matmul_forward(Act out, ConstAct inp, ConstAct weight, const float* bias,
                                        const int32_t* counts, int64_t R, int64_t E, int64_t C,
                                        int64_t OC) const {
  for_each_group(counts, R, E, "grouped_matmul_forward", [&](int64_t e, int64_t row, int64_t n) {
    CpuBackend::matmul_forward(at(out, row * OC), at(inp, row * C), at(weight, e * OC * C),
                               bias ? bias + e * OC : nullptr, n, C, OC);
  });
}

void CpuBackend::grouped_matmul_backward(float* dinp, float* dweight, float* dbias,
                                         ConstAct dout, ConstAct inp, ConstAct weight,
                                         const int32_t* counts, int64_t R, int64_t E, int64_t C,
                                         int64_t OC, bool accumulate_dweight) const {
  for_each_group(counts, R, E, "grouped_matmul_backward", [&](int64_t e, int64_t row, int64_t n) {
    CpuBackend::matmul_backward(dinp ? dinp + row * C : nullptr,
                                dweight ? dweight + e * OC * C : nullptr,
                                dbias ? dbias + e * OC : nullptr, at(dout, row * OC),
                                at(inp, row * C), at(weight, e * OC * C), n, C, OC,
                                /*accumulate_dinp=*/false, accumulate_dweight);
  });
}

}  // namespace tessera::kernels

// SwiGLU forward and backward.
#include "tessera/kernels/cpu/swiglu.h"

#include "tessera/kernels/cpu/storage.h"
#include "tessera/kernels/cpu/vec_math.h"

namespace tessera::cpu {

namespace {
// Threading a short matrix costs more than it saves (as GELU's threshold).
constexpr int64_t kParallelMin = 1 << 14;

// sigmoid(x) = 1 / (1 + exp(-x)); exp_fast clamps, so large |x| gives 0 or 1, never nan.
inline float sigmoid_fast(float x) { return 1.0f / (1.0f + exp_fast(-x)); }

// S: the storage of inp, out (and dinp); the arithmetic is fp32.
template <class S>
void swiglu_forward_as(typename S::T* out, const typename S::T* inp, int64_t N, int64_t F) {
#pragma omp parallel for schedule(static) if (N * F > kParallelMin)
  for (int64_t n = 0; n < N; n++) {
    const typename S::T* gate = inp + n * 2 * F;  // (F)
    const typename S::T* up = gate + F;           // (F)
    typename S::T* y = out + n * F;               // (F)
#pragma omp simd
    for (int64_t f = 0; f < F; f++) {
      const float g = S::load(gate[f]);
      y[f] = S::store(g * sigmoid_fast(g) * S::load(up[f]));
    }
  }
}

// d out / d gate = up * sig(g) * (1 + g * (1 - sig(g))), d out / d up = silu(g).
template <class S>
void swiglu_backward_as(typename S::T* dinp, const typename S::T* inp, const float* dout,
                        int64_t N, int64_t F) {
#pragma omp parallel for schedule(static) if (N * F > kParallelMin)
  for (int64_t n = 0; n < N; n++) {
    const typename S::T* gate = inp + n * 2 * F;  // (F)
    const typename S::T* up = gate + F;           // (F)
    const float* dy = dout + n * F;               // (F)
    typename S::T* dgate = dinp + n * 2 * F;      // (F)
    typename S::T* dup = dgate + F;               // (F)
#pragma omp simd
    for (int64_t f = 0; f < F; f++) {
      const float g = S::load(gate[f]), u = S::load(up[f]);
      const float sg = sigmoid_fast(g);
      dgate[f] = S::store(dy[f] * u * sg * (1.0f + g * (1.0f - sg)));
      dup[f] = S::store(dy[f] * g * sg);
    }
  }
}

}  // namespace

void swiglu_forward(float* out, const float* inp, int64_t N, int64_t F) {
  swiglu_forward_as<StoreF32>(out, inp, N, F);
}
void swiglu_forward_bf16(bf16_t* out, const bf16_t* inp, int64_t N, int64_t F) {
  swiglu_forward_as<StoreBf16>(out, inp, N, F);
}
void swiglu_forward_fp16(fp16_t* out, const fp16_t* inp, int64_t N, int64_t F) {
  swiglu_forward_as<StoreFp16>(out, inp, N, F);
}
void swiglu_backward(float* dinp, const float* inp, const float* dout, int64_t N, int64_t F) {
  swiglu_backward_as<StoreF32>(dinp, inp, dout, N, F);
}
void swiglu_backward_bf16(bf16_t* dinp, const bf16_t* inp, const float* dout, int64_t N,
                          int64_t F) {
  swiglu_backward_as<StoreBf16>(dinp, inp, dout, N, F);
}
void swiglu_backward_fp16(fp16_t* dinp, const fp16_t* inp, const float* dout, int64_t N,
                          int64_t F) {
  swiglu_backward_as<StoreFp16>(dinp, inp, dout, N, F);
}

}  // namespace tessera::cpu

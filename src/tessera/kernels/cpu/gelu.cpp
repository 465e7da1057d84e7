// GELU (tanh approximation) forward and backward.
#include "tessera/kernels/cpu/gelu.h"

#include "tessera/kernels/cpu/storage.h"
#include "tessera/kernels/cpu/vec_math.h"

namespace tessera::cpu {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
// Threading a short vector costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

// gelu(x) in fp32: the one expression every forward form uses.
inline float gelu_of(float x) {
  const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
  return 0.5f * x * (1.0f + tanh_fast(u));
}

// S: the storage of inp and out (storage.h); the arithmetic is fp32.
template <class S>
void gelu_forward_as(typename S::T* out, const typename S::T* inp, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; i++) out[i] = S::store(gelu_of(S::load(inp[i])));
}

// dinp is stored like inp: under --bf16 / --fp16 it is the fc GEMM's
// backward operand, rounded here once instead of by a separate cast.
template <class S>
void gelu_backward_as(typename S::T* dinp, const typename S::T* inp, const float* dout,
                      int64_t n) {
  // d/dx [0.5 x (1 + tanh u)] = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) du/dx,
  // du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2). An fp32 dinp may alias dout:
  // each element is read before it is written.
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; i++) {
    const float x = S::load(inp[i]);
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    const float th = tanh_fast(u);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    const float grad = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
    dinp[i] = S::store(dout[i] * grad);
  }
}

}  // namespace

void gelu_forward(float* out, const float* inp, int64_t n) {
  gelu_forward_as<StoreF32>(out, inp, n);
}
void bias_gelu_forward(float* out, float* pre, const float* bias, int64_t N, int64_t C) {
  // Rows in parallel (a row is a whole number of cache lines of pre and
  // out), the columns of a row vectorised.
#pragma omp parallel for schedule(static) if (N * C > kParallelMin)
  for (int64_t n = 0; n < N; n++) {
    float* x = pre + n * C;  // (C)
    float* y = out + n * C;  // (C)
#pragma omp simd
    for (int64_t c = 0; c < C; c++) {
      x[c] += bias[c];  // bias.cpp bias_add's operation
      y[c] = gelu_of(x[c]);
    }
  }
}
void gelu_forward_bf16(bf16_t* out, const bf16_t* inp, int64_t n) {
  gelu_forward_as<StoreBf16>(out, inp, n);
}
void gelu_forward_fp16(fp16_t* out, const fp16_t* inp, int64_t n) {
  gelu_forward_as<StoreFp16>(out, inp, n);
}
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) {
  gelu_backward_as<StoreF32>(dinp, inp, dout, n);
}
void gelu_backward_bf16(bf16_t* dinp, const bf16_t* inp, const float* dout, int64_t n) {
  gelu_backward_as<StoreBf16>(dinp, inp, dout, n);
}
void gelu_backward_fp16(fp16_t* dinp, const fp16_t* inp, const float* dout, int64_t n) {
  gelu_backward_as<StoreFp16>(dinp, inp, dout, n);
}

}  // namespace tessera::cpu

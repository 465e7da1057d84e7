// AdamW, one fused pass over a range of the flat buffers.
#include "tessera/kernels/cpu/adamw.h"

#include <omp.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif
// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized on _mm512_sqrt_ps (a
// known false positive on its `__Y = __Y` placeholder).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>
#include <cmath>

#include "tessera/kernels/cpu/cast.h"

namespace tessera::cpu {

namespace {

struct Scalars {
  float decay, b1, b2, one_m_b1, one_m_b2, neg_step_size, bc2_sqrt, eps, gscale;
};

// One element, scalar; also the tail of the AVX-512 path.
inline void adamw_one(float* params, float* grads, float* m, float* v, int64_t i,
                      const Scalars& s) {
  const float g = grads[i] * s.gscale;
  grads[i] = 0.0f;  // the next step accumulates from zero
  const float mi = m[i] * s.b1 + s.one_m_b1 * g;
  const float vi = v[i] * s.b2 + s.one_m_b2 * (g * g);
  m[i] = mi;
  v[i] = vi;
  const float denom = std::sqrt(vi) / s.bc2_sqrt + s.eps;
  params[i] = params[i] * s.decay + s.neg_step_size * mi / denom;  // addcdiv's order
}

// The pass over [i0, i1). GCC will not vectorize std::sqrt without
// -fno-math-errno (it keeps a libm branch for negative inputs), so the
// AVX-512 path is written with intrinsics; the same ops in the same order,
// and vsqrtps is correctly rounded like sqrtf.
void adamw_range(float* params, float* grads, float* m, float* v, int64_t i0, int64_t i1,
                 const Scalars& s) {
  int64_t i = i0;
#if defined(__AVX512F__)
  const __m512 gscale = _mm512_set1_ps(s.gscale), b1 = _mm512_set1_ps(s.b1),
               b2 = _mm512_set1_ps(s.b2), omb1 = _mm512_set1_ps(s.one_m_b1),
               omb2 = _mm512_set1_ps(s.one_m_b2), bc2s = _mm512_set1_ps(s.bc2_sqrt),
               eps = _mm512_set1_ps(s.eps), decay = _mm512_set1_ps(s.decay),
               nss = _mm512_set1_ps(s.neg_step_size);
  for (; i + 16 <= i1; i += 16) {
    const __m512 g = _mm512_mul_ps(_mm512_loadu_ps(grads + i), gscale);
    _mm512_storeu_ps(grads + i, _mm512_setzero_ps());
    const __m512 mi = _mm512_fmadd_ps(_mm512_loadu_ps(m + i), b1, _mm512_mul_ps(omb1, g));
    const __m512 vi =
        _mm512_fmadd_ps(_mm512_loadu_ps(v + i), b2, _mm512_mul_ps(omb2, _mm512_mul_ps(g, g)));
    _mm512_storeu_ps(m + i, mi);
    _mm512_storeu_ps(v + i, vi);
    const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), bc2s), eps);
    const __m512 upd = _mm512_div_ps(_mm512_mul_ps(nss, mi), denom);
    _mm512_storeu_ps(params + i, _mm512_fmadd_ps(_mm512_loadu_ps(params + i), decay, upd));
  }
#endif
  for (; i < i1; i++) adamw_one(params, grads, m, v, i, s);
}

// 16 KiB of fp32 per block: the updated parameters are read back for the
// cast from L1, not memory.
constexpr int64_t kCastBlock = 4096;

// [i0, i1) updated, and each block's new parameters written to the working
// copy right after the block's update.
void adamw_range_with_copy(float* params, float* grads, float* m, float* v, int64_t i0, int64_t i1,
                           const Scalars& s, uint16_t* working, DType type) {
  for (int64_t b = i0; b < i1; b += kCastBlock) {
    const int64_t e = std::min(i1, b + kCastBlock);
    adamw_range(params, grads, m, v, b, e, s);
    if (type == DType::F16)
      for (int64_t i = b; i < e; ++i) working[i] = fp32_to_fp16(params[i]);
    else
      for (int64_t i = b; i < e; ++i) working[i] = fp32_to_bf16(params[i]);
  }
}

}  // namespace

void adamw_update(float* params, float* grads, float* m, float* v, int64_t n, const AdamWArgs& a,
                  uint16_t* working, DType working_type) {
  // Same operation order and scalar precision as torch.optim.AdamW (1.13,
  // single-tensor path): the scalars are formed in double, as Python floats,
  // then each elementwise op runs in fp32:
  //   p *= 1 - lr*wd;  m = m*b1 + (1-b1) g;  v = v*b2 + (1-b2) g*g;
  //   p += -(lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)
  const double lr = a.lr, b1 = a.beta1, b2 = a.beta2;
  const double bc1 = 1.0 - std::pow(b1, double(a.step));
  const double bc2 = 1.0 - std::pow(b2, double(a.step));
  const Scalars s{
      .decay = float(1.0 - lr * double(a.weight_decay)),
      .b1 = a.beta1,
      .b2 = a.beta2,
      .one_m_b1 = float(1.0 - b1),
      .one_m_b2 = float(1.0 - b2),
      .neg_step_size = float(-(lr / bc1)),
      .bc2_sqrt = float(std::sqrt(bc2)),
      .eps = a.eps,
      .gscale = a.grad_scale,
  };

  // Memory-bound: one contiguous slice per thread, cache-line aligned cuts.
#pragma omp parallel if (n > (1 << 15))
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t per = ((n + nt - 1) / nt + 15) / 16 * 16;
    const int64_t i0 = std::min(n, t * per), i1 = std::min(n, i0 + per);
    if (working)
      adamw_range_with_copy(params, grads, m, v, i0, i1, s, working, working_type);
    else
      adamw_range(params, grads, m, v, i0, i1, s);
  }
}

}  // namespace tessera::cpu

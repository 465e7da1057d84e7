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
#include <cstdint>

#include "tessera/kernels/cpu/cast.h"

namespace tessera::cpu {

namespace {

struct Scalars {
  float decay, b1, b2, one_m_b1, one_m_b2, neg_step_size, bc2_sqrt, eps, gscale;
};

// One element, scalar; also the head and tail of the AVX-512 path. The
// fused multiply-adds are written out (std::fma), the same ones the vector
// body makes: left to the compiler, `a * b + c * d` may fuse either product,
// and GCC chose differently at -O2 (the sanitizer build) than at -O3, so
// the head and the body of one pass disagreed in the last bit.
inline void adamw_one(float* params, float* grads, float* m, float* v, int64_t i,
                      const Scalars& s) {
  const float g = grads[i] * s.gscale;
  grads[i] = 0.0f;  // the next step accumulates from zero
  const float mi = std::fma(m[i], s.b1, s.one_m_b1 * g);
  const float vi = std::fma(v[i], s.b2, s.one_m_b2 * (g * g));
  m[i] = mi;
  v[i] = vi;
  const float denom = std::sqrt(vi) / s.bc2_sqrt + s.eps;
  params[i] = std::fma(params[i], s.decay, s.neg_step_size * mi / denom);  // addcdiv's order
}

#if defined(__AVX512F__)
// 16 fp32 lanes to their 16 bf16 patterns, the same integer steps as
// fp32_to_bf16 (round to nearest even, NaN kept quiet), so the vector and
// scalar paths give the same bits. VCVTNEPS2BF16 would be one instruction
// but flushes denormals, which the scalar form and PyTorch keep.
inline __m256i bf16x16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), odd), 16);
  const __m512i nan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x0040));
  const __mmask16 is_nan = _mm512_cmpgt_epu32_mask(
      _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(is_nan, rounded, nan));
}

// 16 fp32 lanes to fp16 in hardware (round to nearest even from the
// immediate), the bits fp32_to_fp16 gives (tests/kernels/test_cast).
inline __m256i fp16x16(__m512 x) {
  // The all-lanes mask form: the unmasked intrinsic trips GCC 12's
  // -Wmaybe-uninitialized inside its own header.
  return _mm512_maskz_cvtps_ph(0xffff, x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
#endif

// The pass over [i0, i1); with a working copy (Copy = BF16 or F16) each
// updated parameter's 16-bit value is stored from the register that holds it,
// so the copy costs 2 bytes of writes per parameter and no second loop.
// GCC will not vectorize std::sqrt without -fno-math-errno (it keeps a libm
// branch for negative inputs), so the AVX-512 path is written with
// intrinsics; the same ops in the same order, and vsqrtps is correctly
// rounded like sqrtf.
//
// The 16-bit copy is written and not read in the pass, so its stores are
// non-temporal (the cache lines are not fetched first: 2 bytes a parameter
// less traffic on a memory-bound pass, ~6 % of its bytes). They need 32-byte
// aligned addresses, so the first few elements up to one go through the
// scalar form, which gives the vector body's bits (tests/kernels/test_adamw).
template <Precision Copy>
void adamw_range(float* params, float* grads, float* m, float* v, uint16_t* working, int64_t i0,
                 int64_t i1, const Scalars& s) {
  int64_t i = i0;
#if defined(__AVX512F__)
  if constexpr (Copy != Precision::Fp32)
    for (; i < i1 && reinterpret_cast<uintptr_t>(working + i) % 32 != 0; i++) {
      adamw_one(params, grads, m, v, i, s);
      if constexpr (Copy == Precision::Bf16) working[i] = fp32_to_bf16(params[i]);
      else working[i] = fp32_to_fp16(params[i]);
    }
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
    const __m512 p = _mm512_fmadd_ps(_mm512_loadu_ps(params + i), decay, upd);
    _mm512_storeu_ps(params + i, p);
    if constexpr (Copy == Precision::Bf16)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(working + i), bf16x16(p));
    else if constexpr (Copy == Precision::Fp16)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(working + i), fp16x16(p));
  }
  // Non-temporal stores are weakly ordered: fence them before the pass
  // returns, so the next reader (any thread, after the region's barrier)
  // sees them.
  if constexpr (Copy != Precision::Fp32) _mm_sfence();
#endif
  for (; i < i1; i++) {
    adamw_one(params, grads, m, v, i, s);
    if constexpr (Copy == Precision::Bf16) working[i] = fp32_to_bf16(params[i]);
    else if constexpr (Copy == Precision::Fp16) working[i] = fp32_to_fp16(params[i]);
  }
}

}  // namespace

void adamw_update(float* params, float* grads, float* m, float* v, int64_t n, const AdamWArgs& a,
                  uint16_t* working, Precision working_type) {
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
    if (!working)
      adamw_range<Precision::Fp32>(params, grads, m, v, nullptr, i0, i1, s);
    else if (working_type == Precision::Fp16)
      adamw_range<Precision::Fp16>(params, grads, m, v, working, i0, i1, s);
    else
      adamw_range<Precision::Bf16>(params, grads, m, v, working, i0, i1, s);
  }
}

}  // namespace tessera::cpu

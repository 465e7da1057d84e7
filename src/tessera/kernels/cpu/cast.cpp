// Buffer casts. bf16 is a few integer operations per element, which the
// compiler vectorises from the inline scalar form. fp16 has branches
// (subnormals, overflow), so where the CPU has it the hardware conversion
// runs (VCVTPS2PH / VCVTPH2PS: 16 lanes on AVX-512, 8 with F16C on AVX2;
// round-to-nearest-even from the immediate, not from MXCSR), which gives the
// same bits as the scalar form (tests/kernels/test_cast). The scalar form
// is the fallback: on an AVX2 host (2026-12-01) it made an fp16 step's casts
// and 16-bit kernels up to ~2x slower where values straddle fp16's
// subnormal range (the branches mispredict), as unscaled gradients do.
#include "tessera/kernels/cpu/cast.h"

#if defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

namespace tessera::cpu {

namespace {
// Threading a short vector costs more than it saves.
constexpr int64_t kParallelMin = 1 << 15;

#if defined(__AVX512F__)
constexpr int64_t kLanes = 16;  // fp32 lanes of a zmm register
// kLanes floats from `in` rounded to halves at `out`, and back.
inline void to_fp16_block(fp16_t* out, const float* in) {
  // The all-lanes mask form: the unmasked intrinsic trips GCC 12's
  // -Wmaybe-uninitialized inside its own header.
  const __m256i h = _mm512_maskz_cvtps_ph(0xffff, _mm512_loadu_ps(in),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), h);
}
inline void from_fp16_block(float* out, const fp16_t* in) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in));
  _mm512_storeu_ps(out, _mm512_maskz_cvtph_ps(0xffff, h));
}
#elif defined(__F16C__)
constexpr int64_t kLanes = 8;  // fp32 lanes of a ymm register
inline void to_fp16_block(fp16_t* out, const float* in) {
  const __m128i h =
      _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), h);
}
inline void from_fp16_block(float* out, const fp16_t* in) {
  _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in))));
}
#else
constexpr int64_t kLanes = 1;  // no hardware conversion: the scalar form
inline void to_fp16_block(fp16_t* out, const float* in) { *out = fp32_to_fp16(*in); }
inline void from_fp16_block(float* out, const fp16_t* in) { *out = fp16_to_fp32(*in); }
#endif
}  // namespace

void cast_fp32_to_bf16(bf16_t* out, const float* in, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; i++) out[i] = fp32_to_bf16(in[i]);
}

void cast_bf16_to_fp32(float* out, const bf16_t* in, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; i++) out[i] = bf16_to_fp32(in[i]);
}

void cast_fp32_to_fp16(fp16_t* out, const float* in, int64_t n) {
  const int64_t blocks = n / kLanes;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t b = 0; b < blocks; b++) to_fp16_block(out + b * kLanes, in + b * kLanes);
  for (int64_t i = blocks * kLanes; i < n; i++) out[i] = fp32_to_fp16(in[i]);
}

void cast_fp16_to_fp32(float* out, const fp16_t* in, int64_t n) {
  const int64_t blocks = n / kLanes;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t b = 0; b < blocks; b++) from_fp16_block(out + b * kLanes, in + b * kLanes);
  for (int64_t i = blocks * kLanes; i < n; i++) out[i] = fp16_to_fp32(in[i]);
}

bool any_nonfinite(const float* x, int64_t n) {
  // An OR of "exponent all ones" over the buffer: no early exit, so the loop
  // vectorises, and the check costs one read of the gradients.
  uint32_t found = 0;
#pragma omp parallel for simd schedule(static) reduction(| : found) if (n > kParallelMin)
  for (int64_t i = 0; i < n; i++)
    found |= uint32_t((std::bit_cast<uint32_t>(x[i]) & 0x7f800000u) == 0x7f800000u);
  return found != 0;
}

}  // namespace tessera::cpu

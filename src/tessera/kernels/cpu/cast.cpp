// Buffer casts. bf16 is a few integer operations per element, which the
// compiler vectorises from the inline scalar form. fp16 has branches
// (subnormals, overflow), so on AVX-512 it uses the hardware conversion
// (VCVTPS2PH / VCVTPH2PS, round-to-nearest-even from the immediate, not from
// MXCSR), which gives the same bits as the scalar form (tests/kernels/test_cast).
#include "tessera/kernels/cpu/cast.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tessera::cpu {

namespace {
// Threading a short vector costs more than it saves.
constexpr int64_t kParallelMin = 1 << 15;
#if defined(__AVX512F__)
constexpr int64_t kLanes = 16;  // fp32 lanes of a zmm register
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
#if defined(__AVX512F__)
  const int64_t blocks = n / kLanes;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t b = 0; b < blocks; b++) {
    const __m512 v = _mm512_loadu_ps(in + b * kLanes);
    // The all-lanes mask form: the unmasked intrinsic trips GCC 12's
    // -Wmaybe-uninitialized inside its own header.
    const __m256i h =
        _mm512_maskz_cvtps_ph(0xffff, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + b * kLanes), h);
  }
  for (int64_t i = blocks * kLanes; i < n; i++) out[i] = fp32_to_fp16(in[i]);
#else
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; i++) out[i] = fp32_to_fp16(in[i]);
#endif
}

void cast_fp16_to_fp32(float* out, const fp16_t* in, int64_t n) {
#if defined(__AVX512F__)
  const int64_t blocks = n / kLanes;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t b = 0; b < blocks; b++) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + b * kLanes));
    _mm512_storeu_ps(out + b * kLanes, _mm512_maskz_cvtph_ps(0xffff, h));
  }
  for (int64_t i = blocks * kLanes; i < n; i++) out[i] = fp16_to_fp32(in[i]);
#else
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; i++) out[i] = fp16_to_fp32(in[i]);
#endif
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

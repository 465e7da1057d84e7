// Small vectorised, threaded elementwise and reduction helpers.
#pragma once
#include <cstdint>

#include "tessera/core/dtype.h"

namespace tessera::cpu {

// out (n) = a (n) + b (n)       (out may alias a or b)
void add(float* out, const float* a, const float* b, int64_t n);

// y (n) += x (n)
void accumulate(float* y, const float* x, int64_t n);
// y (n) += x (n) widened (exactly) from bf16 / fp16: a reduced 16-bit
// gradient summed into an fp32 one, each element's sum as accumulate's.
void accumulate_bf16(float* y, const bf16_t* x, int64_t n);
void accumulate_fp16(float* y, const fp16_t* x, int64_t n);

// out (bytes) = in (bytes); they do not overlap.
void copy_bytes(void* out, const void* in, int64_t bytes);
// x (n) = value; the 16-bit form writes the bit pattern `bits`.
void fill(float* x, float value, int64_t n);
void fill_u16(uint16_t* x, uint16_t bits, int64_t n);

// x (n) *= s
void scale(float* x, float s, int64_t n);

// sum of x[i]^2 in double precision (for the global gradient norm)
double sum_squares(const float* x, int64_t n);

// true when every x[i] is finite
bool all_finite(const float* x, int64_t n);

}  // namespace tessera::cpu

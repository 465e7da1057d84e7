// Small vectorised, threaded elementwise and reduction helpers.
#pragma once
#include <cstdint>

namespace tessera::cpu {

// out (n) = a (n) + b (n)       (out may alias a or b)
void add(float* out, const float* a, const float* b, int64_t n);

// y (n) += x (n)
void accumulate(float* y, const float* x, int64_t n);

// x (n) *= s
void scale(float* x, float s, int64_t n);

// sum of x[i]^2 in double precision (for the global gradient norm)
double sum_squares(const float* x, int64_t n);

// true when every x[i] is finite
bool all_finite(const float* x, int64_t n);

}  // namespace tessera::cpu

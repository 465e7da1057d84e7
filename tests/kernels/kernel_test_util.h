// Shared helpers for the CPU kernel tests: deterministic random data and
// error measures. Header-only; each test_*.cpp is its own binary.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tessera/core/rng.h"

namespace tessera::test {

// n normals * scale, keyed by seed (same values on every run).
inline std::vector<float> randn(int64_t n, uint64_t seed, float scale = 1.0f) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; i++) x[i] = rng_normal(seed, 0, uint64_t(i)) * scale;
  return x;
}

inline std::vector<double> to_double(const std::vector<float>& x) {
  return std::vector<double>(x.begin(), x.end());
}

// max_i |got_i - want_i| / (atol + |want_i|): a relative error with an
// absolute floor atol for entries near zero. Used as
// EXPECT_LT(max_rel_err(got, want, atol), rtol). A nan or inf in got fails.
template <typename A, typename B>
double max_rel_err(const A& got, const B& want, double atol) {
  double worst = 0.0;
  for (size_t i = 0; i < want.size(); i++) {
    const double g = double(got[i]), w = double(want[i]);
    const double e = std::isfinite(g) ? std::abs(g - w) / (atol + std::abs(w))
                                      : INFINITY;  // a nan must fail, not compare false
    worst = std::max(worst, e);
  }
  return worst;
}

// max_i |got_i - want_i| / max_i |want_i|: error measured against the scale
// of the whole tensor. The right measure where entries come from sums with
// cancellation (a value that should be 0 comes out as 1e-8 in fp32).
// A nan or inf in got fails.
template <typename A, typename B>
double max_err_vs_scale(const A& got, const B& want) {
  double worst = 0.0, scale = 0.0;
  for (size_t i = 0; i < want.size(); i++) {
    const double g = double(got[i]), w = double(want[i]);
    worst = std::max(worst, std::isfinite(g) ? std::abs(g - w) : INFINITY);
    scale = std::max(scale, std::abs(w));
  }
  return worst / (scale > 0 ? scale : 1.0);
}

// d loss / d x by central differences, one coordinate at a time (loss takes
// the whole vector; x is restored after each coordinate).
template <typename Loss>
std::vector<double> central_differences(Loss loss, std::vector<double> x, double eps) {
  std::vector<double> numeric(x.size());
  for (size_t i = 0; i < x.size(); i++) {
    const double xi = x[i];
    x[i] = xi + eps;
    const double lp = loss(x);
    x[i] = xi - eps;
    const double lm = loss(x);
    x[i] = xi;
    numeric[i] = (lp - lm) / (2 * eps);
  }
  return numeric;
}

}  // namespace tessera::test

#include "tessera/plan/straggler.h"

#include <cmath>
#include <map>
#include <mutex>

namespace tessera::plan {

namespace {

// E[max] = integral of x n phi(x) Phi(x)^(n-1) dx, by the midpoint rule on
// [-8, 8] in steps of 1/256 (phi is below 1e-14 outside): exact to ~1e-6
// against the tabulated values (n = 2: 1/sqrt(pi) = 0.564190; n = 8: 1.4236).
double integrate_max(int64_t n) {
  const double h = 1.0 / 256.0, inv_sqrt2 = 1.0 / std::sqrt(2.0);
  const double inv_sqrt2pi = 1.0 / std::sqrt(2.0 * M_PI);
  double sum = 0;
  for (double x = -8.0 + h / 2; x < 8.0; x += h) {
    const double phi = inv_sqrt2pi * std::exp(-0.5 * x * x);
    const double cdf = 0.5 * std::erfc(-x * inv_sqrt2);
    sum += x * double(n) * phi * std::pow(cdf, double(n - 1));
  }
  return sum * h;
}

}  // namespace

double expected_max_of_normals(int64_t n) {
  if (n <= 1) return 0;
  // The search prices thousands of layouts over a few device counts.
  static std::mutex mu;
  static std::map<int64_t, double> cache;
  const std::lock_guard<std::mutex> lock(mu);
  const auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  return cache[n] = integrate_max(n);
}

double straggler_seconds(const SystemSpec& sys, int64_t devices, double paced) {
  const double spread = sys.device_speed_spread;
  if (spread <= 0 || paced <= 0) return 0;
  // The slowest runs at (1 - spread z) of the mean speed: its time is paced / (1 - spread z).
  const double slow = spread * expected_max_of_normals(devices);
  return paced * slow / (1.0 - slow);
}

}  // namespace tessera::plan

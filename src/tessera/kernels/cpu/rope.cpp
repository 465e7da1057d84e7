// RoPE angles and the per-shape table cache.
#include "tessera/kernels/cpu/rope.h"

#include <cmath>
#include <mutex>
#include <tuple>

namespace tessera::cpu {

void rope_angles(float* cos, float* sin, int64_t pos, int64_t HS, float base) {
  const int64_t half = HS / 2;
  for (int64_t i = 0; i < half; i++) {
    const double inv_freq = std::pow(double(base), -2.0 * double(i) / double(HS));
    const double a = double(pos) * inv_freq;
    cos[i] = float(std::cos(a));
    sin[i] = float(std::sin(a));
  }
}

void rope_rows(float* x, int64_t rows, int64_t stride, int64_t heads, int64_t HS, int64_t pos0,
               float base) {
  const int64_t half = HS / 2;
  std::vector<float> c(half), s(half);  // (half) the row's angles
  for (int64_t r = 0; r < rows; r++) {
    rope_angles(c.data(), s.data(), pos0 + r, HS, base);
    for (int64_t h = 0; h < heads; h++) rope_rotate(x + r * stride + h * HS, c.data(), s.data(), half);
  }
}

std::shared_ptr<const RopeTable> rope_table(int64_t T, int64_t HS, float base) {
  // Few shapes per process (training's T, a recompute's, evaluation's), so
  // a short list searched under one lock; a lookup is a few compares.
  static std::mutex mu;
  static std::vector<std::shared_ptr<const RopeTable>> cache;
  constexpr size_t kKeep = 8;
  const int64_t half = HS / 2;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& t : cache)
      if (t->T == T && t->half == half && t->base == base) return t;
  }
  auto t = std::make_shared<RopeTable>();
  t->T = T, t->half = half, t->base = base;
  t->cos.resize(size_t(T * half));
  t->sin.resize(size_t(T * half));
  for (int64_t p = 0; p < T; p++)
    rope_angles(t->cos.data() + p * half, t->sin.data() + p * half, p, HS, base);
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= kKeep) cache.erase(cache.begin());
  cache.push_back(t);
  return t;
}

}  // namespace tessera::cpu

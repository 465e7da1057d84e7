// Deterministic random numbers: a counter-based generator (splitmix64 over a
// (seed, stream, counter) key), so any value can be drawn from its position
// alone. Initialisation and data sampling depend only on the seed and the
// index of what is drawn, never on the parallel layout or the thread count.
#pragma once
#include <cmath>
#include <cstdint>

namespace tessera {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A 64-bit value keyed by (seed, stream, counter).
inline uint64_t rng_u64(uint64_t seed, uint64_t stream, uint64_t counter) {
  return splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ counter);
}

// Uniform in [0, 1) with 24 random bits.
inline float rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter) {
  return float(rng_u64(seed, stream, counter) >> 40) * (1.0f / 16777216.0f);
}

// Standard normal (Box-Muller on two keyed uniforms).
inline float rng_normal(uint64_t seed, uint64_t stream, uint64_t counter) {
  uint64_t r = rng_u64(seed, stream, counter);
  double u1 = (double((r >> 11)) + 1.0) * (1.0 / 9007199254740993.0);  // (0, 1]
  double u2 = double(rng_u64(seed, stream ^ 0x5bd1e995ull, counter) >> 11) * (1.0 / 9007199254740992.0);
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

// A sequential generator for code that draws a stream (sampling in generation).
struct Rng {
  uint64_t seed = 0, stream = 0, counter = 0;
  uint64_t next_u64() { return rng_u64(seed, stream, counter++); }
  float next_uniform() { return rng_uniform(seed, stream, counter++); }
};

}  // namespace tessera

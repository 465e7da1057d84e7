// Shared by the checkpoint tests: a scratch directory (scratch_dir.h) and the tiny model.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

#include <fmt/core.h>

#include "tessera/core/rng.h"
#include "tessera/model/gpt.h"
#include "scratch_dir.h"
#include "tiny_model.h"

namespace tessera::test {



// Deterministic non-trivial values (not the init: every element distinct).
inline void fill_random(float* x, int64_t n, uint64_t seed) {
  for (int64_t i = 0; i < n; ++i) x[i] = rng_normal(seed, 0, uint64_t(i));
}

}  // namespace tessera::test

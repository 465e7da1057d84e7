// Shared by the checkpoint tests: a scratch directory and the tiny model.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

#include <fmt/core.h>

#include "tessera/core/rng.h"
#include "tessera/model/gpt.h"
#include "tiny_model.h"

namespace tessera::test {

// A fresh directory under /tmp, removed when the test passes.
struct ScratchDir {
  std::filesystem::path path;
  explicit ScratchDir(const std::string& name) {
    path = std::filesystem::temp_directory_path() /
           fmt::format("tessera_{}_{}", name, ::getpid());
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
  std::string operator/(const std::string& s) const { return (path / s).string(); }
};


// Deterministic non-trivial values (not the init: every element distinct).
inline void fill_random(float* x, int64_t n, uint64_t seed) {
  for (int64_t i = 0; i < n; ++i) x[i] = rng_normal(seed, 0, uint64_t(i));
}

}  // namespace tessera::test

// What every fuzz test needs around the driver: a scratch directory for the
// files a parser reads, and the verdict on a target's tally.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "fuzz_driver.h"

namespace tessera::fuzz {

// A scratch directory per test, removed at the end.
struct Scratch {
  std::filesystem::path dir;
  explicit Scratch(const std::string& name) {
    dir = std::filesystem::temp_directory_path() /
          ("tessera_fuzz_" + name + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

inline void expect_clean(const Tally& t) {
  for (size_t i = 0; i < t.failures.size() && i < 5; ++i) ADD_FAILURE() << t.failures[i];
  EXPECT_GT(t.ok + t.errors, 0);
}

}  // namespace tessera::fuzz

// The engine side of the PyTorch reference tests (tests/model/test_torch_*.cpp):
// a scratch directory the engine dumps its parameters, gradients and
// manifest into, the reference script run on it with Debian's
// /usr/bin/python3 (the interpreter python3-torch belongs to), and the
// (B, T + 1) token windows cut into inputs and next-token targets as the
// trainer does. One place, so the three tests cannot drift apart.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <fmt/core.h>

namespace tessera::test {

class TorchDump {
 public:
  // A fresh directory under the system's temp dir, unique to the test and process.
  explicit TorchDump(const std::string& tag)
      : dir_(std::filesystem::temp_directory_path() / fmt::format("tessera_{}_{}", tag, getpid())) {
    std::filesystem::create_directories(dir_);
  }
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path operator/(const char* file) const { return dir_ / file; }

  // Runs tests/model/SCRIPT on the directory; the script prints what
  // disagrees and exits nonzero. The files stay behind for a failure.
  void check_with(const char* script) const {
    const std::string cmd = fmt::format("/usr/bin/python3 {}/tests/model/{} {}", TESSERA_SOURCE_DIR,
                                        script, dir_.string());
    const int rc = std::system(cmd.c_str());
    EXPECT_EQ(rc, 0) << "PyTorch reference " << script << " disagrees (see its output above); files in "
                     << dir_;
    if (rc == 0) std::filesystem::remove_all(dir_);
  }

 private:
  std::filesystem::path dir_;
};

// window: (B, T + 1) tokens -> in, tgt: (B, T) each, tgt[t] = window[t + 1].
inline void split_window(const int32_t* window, int64_t B, int64_t T, int32_t* in, int32_t* tgt) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      in[b * T + t] = window[b * (T + 1) + t];
      tgt[b * T + t] = window[b * (T + 1) + t + 1];
    }
}

}  // namespace tessera::test

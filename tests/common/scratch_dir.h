// A fresh directory under /tmp for one test's files (the checkpoint tests,
// the fuzz harness).
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

#include <fmt/core.h>

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

}  // namespace tessera::test

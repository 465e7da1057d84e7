// A text written to a file under the temporary directory, for the planner's
// tests that load systems and metrics files. Each test names its files
// uniquely: test binaries run in parallel under CTest.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>

inline std::string write_temp(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / "tessera_plan_tests";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name) << text;
  return (dir / name).string();
}

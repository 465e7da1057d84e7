// The path of a system file the repository ships (configs/systems/NAME.toml),
// for tests that check what a shipped file sets.
#pragma once
#include <filesystem>
#include <string>

inline std::string shipped_system_path(const char* name) {
  return (std::filesystem::path(TESSERA_SOURCE_DIR) / "configs" / "systems" / (std::string(name) + ".toml"))
      .string();
}

// The default training text: the English fortunes of Debian's `fortunes`
// package (installed by scripts/setup.sh), read as raw bytes.
#pragma once
#include <string>
#include <vector>

namespace tessera {

// Directory of the fortune files (Debian's path).
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

// The concatenated text of every fortune file in `dir` (skipping the .dat
// indexes and .u8 links), in sorted file order. Throws naming the directory
// if it is missing or empty.
std::string read_fortunes(const std::string& dir = kFortunesDir);

// Every byte of `text` as a token id in [0, 256).
std::vector<int32_t> bytes_to_tokens(const std::string& text);

}  // namespace tessera

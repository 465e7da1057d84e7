#include "tessera/data/fortunes_corpus.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tessera/core/error.h"

namespace tessera {

std::string read_fortunes(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  TESSERA_CHECK(fs::is_directory(dir, ec),
                "default corpus {} not found: install Debian's `fortunes` package "
                "(bash scripts/setup.sh) or pass --data-path",
                dir);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file() || e.is_symlink()) continue;
    if (e.path().has_extension()) continue;  // .dat indexes, .u8 links
    files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  TESSERA_CHECK(!files.empty(), "default corpus {} holds no fortune files", dir);
  std::string text;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    text += ss.str();
  }
  return text;
}

std::vector<int32_t> bytes_to_tokens(const std::string& text) {
  std::vector<int32_t> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) out[i] = int32_t(static_cast<unsigned char>(text[i]));
  return out;
}

}  // namespace tessera

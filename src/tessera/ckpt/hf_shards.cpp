#include "tessera/ckpt/hf_shards.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>
#include <regex>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "tessera/ckpt/durable_io.h"
#include "tessera/ckpt/hf_index.h"
#include "tessera/core/error.h"

namespace tessera::ckpt {

namespace fs = std::filesystem;
using nlohmann::json;

uint64_t parse_shard_size(const std::string& text, const char* flag) {
  const size_t digits = std::find_if(text.begin(), text.end(), [](char c) {
                          return !std::isdigit(static_cast<unsigned char>(c));
                        }) - text.begin();
  std::string unit = text.substr(digits);
  const std::string as_written = unit;
  for (char& c : unit) c = char(std::toupper(static_cast<unsigned char>(c)));
  static const std::pair<const char*, uint64_t> kUnits[] = {
      {"", 1},           {"B", 1},
      {"KB", 1000},      {"MB", 1000 * 1000},        {"GB", 1000 * 1000 * 1000},
      {"KIB", 1u << 10}, {"MIB", 1u << 20},          {"GIB", uint64_t(1) << 30}};
  const auto* u = std::find_if(std::begin(kUnits), std::end(kUnits),
                               [&](const auto& k) { return unit == k.first; });
  TESSERA_CHECK(digits > 0 && digits <= 12 && u != std::end(kUnits),
                "{} '{}': not a size (an integer with KB, MB, GB, KiB, MiB or GiB, e.g. 5GB)", flag,
                text);
  // transformers divides by 8 for "5Gb" (bits): refuse it rather than write
  // shards 8 times the size someone meant.
  TESSERA_CHECK(as_written.size() < 2 || as_written.back() != 'b' || unit.ends_with("IB"),
                "{} '{}': a lowercase b means bits to Hugging Face; write {}B for bytes", flag,
                text, text.substr(0, text.size() - 1));
  const uint64_t n = std::stoull(text.substr(0, digits)) * u->second;
  TESSERA_CHECK(n > 0, "{} '{}': must be more than 0 bytes", flag, text);
  return n;
}

std::vector<std::string> shard_names(size_t n) {
  std::vector<std::string> out;
  for (size_t i = 1; i <= n; ++i) out.push_back(fmt::format("model-{:05d}-of-{:05d}.safetensors", i, n));
  return out;
}

namespace {

// The weights files of an earlier export that the new ones do not replace:
// model.safetensors or the index, whichever is not written now, and shards
// named like ours that are not among `written`.
void remove_stale_weights(const std::string& out_dir, const std::vector<std::string>& written) {
  static const std::regex kShard(R"(model-\d{5}-of-\d{5}\.safetensors)");
  std::vector<fs::path> stale;
  std::error_code ec;
  for (const auto& de : fs::directory_iterator(out_dir, ec)) {
    const std::string n = de.path().filename().string();
    const bool weights = n == kSafetensorsName || n == kSafetensorsIndexName ||
                         std::regex_match(n, kShard);
    if (weights && std::find(written.begin(), written.end(), n) == written.end())
      stale.push_back(de.path());
  }
  for (const auto& p : stale) {
    fs::remove(p, ec);
    TESSERA_CHECK(!ec, "cannot remove {} (an earlier export's weights, which a loader could read "
                       "instead of these): {}",
                  p.string(), ec.message());
  }
}

}  // namespace

std::vector<std::string> write_safetensors_shards(const SafetensorsWriter& w,
                                                  const std::string& out_dir, uint64_t max_bytes) {
  const fs::path dir(out_dir);
  std::vector<std::string> written;
  if (max_bytes == 0 || w.tensor_bytes() <= max_bytes) {
    w.write((dir / kSafetensorsName).string());
    written.push_back(kSafetensorsName);
  } else {
    const std::vector<SafetensorsWriter> shards = w.split(max_bytes);
    const std::vector<std::string> names = shard_names(shards.size());
    json weight_map = json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
      shards[i].write((dir / names[i]).string());
      written.push_back(names[i]);
      for (const std::string& t : shards[i].names()) weight_map[t] = names[i];
    }
    // As save_pretrained writes it: keys sorted, two-space indent.
    const json index = {{"metadata", {{"total_size", w.tensor_bytes()}}},
                        {"weight_map", weight_map}};
    // Last: a reader finds the index only once every shard it names is there.
    write_file_atomic((dir / kSafetensorsIndexName).string(), index.dump(2) + "\n");
    written.push_back(kSafetensorsIndexName);
  }
  remove_stale_weights(out_dir, written);
  return written;
}

}  // namespace tessera::ckpt

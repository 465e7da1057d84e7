#include "tessera/ckpt/hf_index.h"

#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/core/regular_file.h"

namespace tessera::ckpt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A JSON object keeps the last of two equal keys; a weight_map naming a
// tensor twice (perhaps in two shards) is refused instead of guessing which
// the writer meant.
json parse_index(const std::string& path, const std::string& text) {
  std::string top_key;  // the key of the top-level member being parsed
  std::set<std::string> names;
  std::string twice;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (ev != json::parse_event_t::key) return true;
    if (depth == 1) top_key = parsed.get<std::string>();
    if (depth == 2 && top_key == "weight_map" && !names.insert(parsed.get<std::string>()).second &&
        twice.empty())
      twice = parsed.get<std::string>();
    return true;
  };
  json j;
  try {
    j = json::parse(text, cb);
  } catch (const json::exception& e) {
    fail("{}: not a valid index (bad JSON: {})", path, e.what());
  }
  TESSERA_CHECK(twice.empty(), "{}: weight_map names tensor {} twice", path, twice);
  return j;
}

// The shard's name as the weight_map wrote it must stay inside the
// checkpoint's directory: an index from the internet must not make the
// import read /etc/... or ../other_model/.
void check_inside(const std::string& index, const std::string& shard, const std::string& tensor) {
  const fs::path p(shard);
  bool escapes = shard.empty() || p.is_absolute() || p.has_root_name();
  for (const fs::path& part : p) escapes = escapes || part == "..";
  TESSERA_CHECK(!escapes,
                "{}: weight_map places {} in shard '{}', which is not a file name inside the "
                "index's directory",
                index, tensor, shard);
}

}  // namespace

ShardIndex read_shard_index(const std::string& path) {
  ShardIndex ix;
  ix.path = path;
  ix.dir = fs::path(path).parent_path().string();
  const json j = parse_index(path, read_regular_file(path, "index"));
  TESSERA_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(),
                "{}: not a safetensors index (no \"weight_map\" object)", path);
  TESSERA_CHECK(!j["weight_map"].empty(), "{}: weight_map is empty", path);
  for (const auto& [tensor, shard] : j["weight_map"].items()) {
    TESSERA_CHECK(shard.is_string(), "{}: weight_map[\"{}\"] is {}, not a shard file name", path,
                  tensor, shard.dump());
    ix.weight_map[tensor] = shard.get<std::string>();
  }
  // Each shard once, named with the first tensor the map places in it.
  std::map<std::string, std::string> first_tensor;
  for (const auto& [tensor, shard] : ix.weight_map) first_tensor.emplace(shard, tensor);
  for (const auto& [shard, tensor] : first_tensor) {
    check_inside(path, shard, tensor);
    const fs::path file = fs::path(ix.dir) / shard;
    std::error_code ec;
    TESSERA_CHECK(fs::exists(file, ec), "{}: weight_map places {} in shard {}, which does not exist ({})",
                  path, tensor, shard, file.string());
    TESSERA_CHECK(fs::is_regular_file(file, ec), "{}: shard {} (of {}) is not a regular file ({})",
                  path, shard, tensor, file.string());
  }
  if (j.contains("metadata")) {
    const json& m = j["metadata"];
    TESSERA_CHECK(m.is_object(), "{}: \"metadata\" is {}, not an object", path, m.dump());
    if (m.contains("total_size")) {
      const json& t = m["total_size"];
      // An integer, or a float holding one (some writers' JSON has 1.0e10).
      const bool whole = t.is_number_unsigned() ||
                         (t.is_number_integer() && t.get<int64_t>() >= 0) ||
                         (t.is_number_float() && t.get<double>() >= 0 && t.get<double>() < 1e19 &&
                          t.get<double>() == double(uint64_t(t.get<double>())));
      TESSERA_CHECK(whole, "{}: metadata.total_size is {}, not a byte count", path, t.dump());
      ix.total_size = t.is_number_float() ? uint64_t(t.get<double>()) : t.get<uint64_t>();
    }
  }
  return ix;
}

}  // namespace tessera::ckpt

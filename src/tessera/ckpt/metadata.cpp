#include "tessera/ckpt/metadata.h"

#include <fmt/format.h>

#include "tessera/core/error.h"

namespace tessera::ckpt {

using nlohmann::json;

std::string shard_file_name(const char* kind, int64_t tp, int64_t pp, int64_t dp) {
  return fmt::format("{}-tp{:02}-pp{:02}-dp{:03}.bin", kind, tp, pp, dp);
}

std::string shard_manifest_name(int64_t tp, int64_t pp, int64_t dp) {
  return fmt::format("shard-tp{:02}-pp{:02}-dp{:03}.json", tp, pp, dp);
}

void merge_manifest(json& md, const json& m) {
  for (const auto& [name, f] : m.at("files").items()) {
    TESSERA_CHECK(!md["files"].contains(name), "two shards wrote the file {}", name);
    md["files"][name] = f;
  }
  md["shards"].push_back(m.at("shard"));
  for (const auto& [name, t] : m.at("tensors").items()) {
    json& dst = md["tensors"][name];
    if (dst.is_null()) {
      dst = {{"global_shape", t.at("global_shape")}, {"dtype", "F32"}, {"shards", json::object()}};
    } else {
      TESSERA_CHECK(dst["global_shape"] == t.at("global_shape"),
                    "shards disagree on the shape of {}: {} vs {}", name,
                    dst["global_shape"].dump(), t.at("global_shape").dump());
    }
    for (const auto& [kind, pieces] : t.at("shards").items())
      for (const auto& p : pieces) dst["shards"][kind].push_back(p);
  }
}

}  // namespace tessera::ckpt

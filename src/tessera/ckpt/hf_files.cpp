#include "tessera/ckpt/hf_files.h"

#include <filesystem>

#include <fmt/core.h>

#include "tessera/ckpt/durable_io.h"
#include "tessera/ckpt/hf_shards.h"
#include "tessera/core/error.h"

namespace tessera::ckpt {

namespace fs = std::filesystem;

void prepare_export_dir(const std::string& out_dir) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  TESSERA_CHECK(!ec, "cannot create {}: {}", out_dir, ec.message());
  std::vector<fs::path> stale;
  for (const auto& de : fs::directory_iterator(out_dir, ec)) {
    const std::string n = de.path().filename().string();
    // model.safetensors's, a shard's or the index's temporary (".tmp-PID").
    if (n.find(".safetensors.tmp") != std::string::npos ||
        n.starts_with("model.safetensors.index.json.tmp-") || n.starts_with("config.json.tmp-"))
      stale.push_back(de.path());
  }
  for (const auto& p : stale) fs::remove(p, ec);
}

void write_export(SafetensorsWriter& w, const std::string& out_dir, const nlohmann::json& config,
                  uint64_t max_shard_bytes) {
  w.set_metadata("format", "pt");  // what transformers' loader expects (each shard too)
  write_safetensors_shards(w, out_dir, max_shard_bytes);
  write_file_atomic((fs::path(out_dir) / "config.json").string(), config.dump(2) + "\n");
}

void refuse_unplaced(const std::string& path, const GPTConfig& m,
                     const std::vector<std::string>& unplaced) {
  if (unplaced.empty()) return;
  std::string list;
  for (size_t i = 0; i < unplaced.size() && i < 4; ++i) list += (i ? ", " : "") + unplaced[i];
  if (unplaced.size() > 4) list += fmt::format(" and {} more", unplaced.size() - 4);
  fail("{}: {} tensor(s) the model ({}) has no place for: {}", path, unplaced.size(), m.summary(),
       list);
}

int64_t config_integer(const nlohmann::json& c, const char* key) {
  TESSERA_CHECK(c.contains(key) && c[key].is_number_integer(), "config.json: missing integer '{}'",
                key);
  return c[key].get<int64_t>();
}

double config_number(const nlohmann::json& c, const char* key, double def) {
  if (!c.contains(key)) return def;
  TESSERA_CHECK(c[key].is_number(), "config.json: '{}' has the wrong type ({})", key, c[key].dump());
  return c[key].get<double>();
}

bool config_boolean(const nlohmann::json& c, const char* key, bool def) {
  if (!c.contains(key)) return def;
  TESSERA_CHECK(c[key].is_boolean(), "config.json: '{}' has the wrong type ({})", key,
                c[key].dump());
  return c[key].get<bool>();
}

}  // namespace tessera::ckpt

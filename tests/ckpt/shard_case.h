// Shared by the sharded-checkpoint tests (test_sharded_import.cpp,
// test_sharded_refusals.cpp): a single model.safetensors cut into shards
// with the project's own writer and an index written by hand, as
// save_pretrained lays them out, so each test can then break one thing.
#pragma once
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/ckpt/hf_shards.h"
#include "tessera/ckpt/safetensors.h"

namespace tessera::test {

// A shard's tensors: name -> (shape, values).
using ShardTensors = std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>;

struct Resharded {
  std::vector<ShardTensors> shards;  // in file order
  nlohmann::json index;              // {"metadata": {"total_size"}, "weight_map"}
  std::vector<std::string> names() const { return ckpt::shard_names(shards.size()); }
};

// The tensors of `file` dealt into n shards in name order (contiguous runs,
// as save_pretrained fills shards in order), and the index that maps them.
inline Resharded reshard(const std::string& file, size_t n) {
  ckpt::SafetensorsFile f(file);
  Resharded r;
  r.shards.resize(n);
  size_t i = 0;
  uint64_t bytes = 0;
  for (const auto& [name, e] : f.entries()) {
    r.shards[i * n / f.entries().size()][name] = {e.shape, f.to_f32(name)};
    bytes += 4 * uint64_t(e.numel());
    ++i;
  }
  r.index["metadata"]["total_size"] = bytes;
  const std::vector<std::string> names = r.names();
  for (size_t s = 0; s < n; ++s)
    for (const auto& [name, v] : r.shards[s]) r.index["weight_map"][name] = names[s];
  return r;
}

// Writes r's shards and index (index_text, when given, instead of r.index)
// into dir, with config.json copied from config_dir.
inline void write_resharded(const Resharded& r, const std::filesystem::path& dir,
                            const std::filesystem::path& config_dir,
                            const std::string& index_text = "") {
  std::filesystem::create_directories(dir);
  const std::vector<std::string> names = r.names();
  for (size_t s = 0; s < r.shards.size(); ++s) {
    ckpt::SafetensorsWriter w;
    for (const auto& [name, v] : r.shards[s]) w.add(name, v.first, v.second.data());
    w.write((dir / names[s]).string());
  }
  std::ofstream(dir / "model.safetensors.index.json")
      << (index_text.empty() ? r.index.dump(2) : index_text);
  if (!std::filesystem::equivalent(config_dir, dir))
    std::filesystem::copy_file(config_dir / "config.json", dir / "config.json",
                               std::filesystem::copy_options::overwrite_existing);
}

}  // namespace tessera::test

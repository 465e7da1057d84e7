#include "tessera/ckpt/hf_tensors.h"

#include <filesystem>

#include "tessera/ckpt/hf_index.h"
#include "tessera/core/error.h"

namespace tessera::ckpt {

namespace fs = std::filesystem;

std::string resolve_hf_weights(const std::string& path, const char* what) {
  std::error_code ec;
  TESSERA_CHECK(fs::exists(path, ec), "{} {}: no such file or directory", what, path);
  if (!fs::is_directory(path, ec)) return path;
  // transformers' order: the single file first, then the index.
  for (const char* name : {kSafetensorsName, kSafetensorsIndexName}) {
    const fs::path p = fs::path(path) / name;
    if (fs::exists(p, ec)) return p.string();
  }
  fail("{} {}: a directory holding neither {} nor {}", what, path, kSafetensorsName,
       kSafetensorsIndexName);
}

HfTensors::HfTensors(const std::string& path) : source_(resolve_hf_weights(path)) {
  if (source_.ends_with(".index.json")) {
    open_shards(source_);
    return;
  }
  files_.push_back(std::make_unique<SafetensorsFile>(source_));
  entries_ = files_.front()->entries();
  for (const auto& [name, e] : entries_) where_[name] = files_.front().get();
}

// Every disagreement between the index and its shards is found here, from
// the headers, before the import reads a tensor: a map and shards that do
// not match are a broken download or a hand edit, and reading them anyway
// would load some tensors from where the writer did not put them.
void HfTensors::open_shards(const std::string& index_path) {
  const ShardIndex ix = read_shard_index(index_path);
  std::map<std::string, const SafetensorsFile*> shard_file;  // the map's name -> its header
  for (const auto& [tensor, shard] : ix.weight_map) {
    if (shard_file.count(shard)) continue;
    files_.push_back(std::make_unique<SafetensorsFile>((fs::path(ix.dir) / shard).string()));
    shard_file[shard] = files_.back().get();
  }
  // Which shards hold each tensor, whatever the map says.
  std::map<std::string, std::vector<const SafetensorsFile*>> holders;
  for (const auto& f : files_)
    for (const auto& [name, e] : f->entries()) holders[name].push_back(f.get());
  for (const auto& [name, in] : holders)
    TESSERA_CHECK(in.size() == 1, "{}: tensor {} is in more than one shard ({} and {})", index_path,
                  name, in[0]->path(), in[1]->path());
  for (const auto& [tensor, shard] : ix.weight_map) {
    const SafetensorsFile* f = shard_file.at(shard);
    auto h = holders.find(tensor);
    TESSERA_CHECK(h != holders.end(), "{}: no tensor {}, which {} places in this shard", f->path(),
                  tensor, index_path);
    TESSERA_CHECK(h->second[0] == f, "{}: weight_map places {} in {}, but it is in {}", index_path,
                  tensor, shard, h->second[0]->path());
  }
  for (const auto& [name, in] : holders)
    TESSERA_CHECK(ix.weight_map.count(name), "{}: tensor {} is not in {}'s weight_map",
                  in[0]->path(), name, index_path);
  uint64_t bytes = 0;
  for (const auto& f : files_) bytes += f->tensor_bytes();
  TESSERA_CHECK(!ix.total_size || *ix.total_size == bytes,
                "{}: metadata.total_size is {} but the shards' tensors hold {} bytes (Hugging "
                "Face's total_size is the tensors' data bytes: the index was written for other "
                "shards, or edited)",
                index_path, ix.total_size.value_or(0), bytes);
  for (const auto& [name, in] : holders) {
    entries_[name] = in[0]->at(name);
    where_[name] = in[0];
  }
}

const SafetensorsEntry& HfTensors::at(const std::string& name) const {
  auto it = entries_.find(name);
  TESSERA_CHECK(it != entries_.end(), "{}: no tensor named {}", source_, name);
  return it->second;
}

const std::string& HfTensors::file_of(const std::string& name) const {
  auto it = where_.find(name);
  TESSERA_CHECK(it != where_.end(), "{}: no tensor named {}", source_, name);
  return it->second->path();
}

std::vector<float> HfTensors::to_f32(const std::string& name) const {
  auto it = where_.find(name);
  TESSERA_CHECK(it != where_.end(), "{}: no tensor named {}", source_, name);
  return it->second->to_f32(name);
}

}  // namespace tessera::ckpt

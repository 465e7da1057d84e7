// model.safetensors.index.json, the table of contents of a sharded Hugging
// Face checkpoint (what save_pretrained writes once a model passes
// max_shard_size):
//   {"metadata": {"total_size": BYTES, ...},
//    "weight_map": {"tensor.name": "model-00001-of-00002.safetensors", ...}}
// total_size is the sum of the tensors' data bytes (huggingface_hub's
// split_state_dict_into_shards_factory), not of the files' sizes.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace tessera::ckpt {

inline constexpr const char* kSafetensorsName = "model.safetensors";
inline constexpr const char* kSafetensorsIndexName = "model.safetensors.index.json";

struct ShardIndex {
  std::string path;                               // the index file
  std::string dir;                                // the directory its shards lie in
  std::map<std::string, std::string> weight_map;  // tensor -> shard (relative to dir)
  std::optional<uint64_t> total_size;             // metadata.total_size, when given
};

// Reads and checks the index at `path`, each problem one line naming the
// file (and the tensor): not JSON, no weight_map object or an empty one, a
// shard that is not a file name, one that leaves the directory (absolute or
// through ..), one that does not exist, a total_size that is not a byte
// count. The shards' contents are checked by HfTensors (hf_tensors.h).
ShardIndex read_shard_index(const std::string& path);

}  // namespace tessera::ckpt

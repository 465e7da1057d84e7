// The tensors of a Hugging Face checkpoint, wherever they lie: one
// model.safetensors, or the shards its model.safetensors.index.json names
// (every model above a few GB comes sharded). The imports (hf_gpt2.h,
// hf_llama.h) read through this and do not know which.
//
// Opening reads the headers only (the index, then each shard's) and checks
// them against each other before any tensor is read; each tensor is then
// read from its shard when asked for, so an import holds one tensor at a
// time, not a shard or the whole model.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/ckpt/safetensors.h"

namespace tessera::ckpt {

// The file `path` names the weights of: a safetensors file or an index
// (*.index.json) as given; a directory's model.safetensors, else its
// model.safetensors.index.json. A directory holding both gives
// model.safetensors, as transformers' from_pretrained does (it looks for
// the single file first). `what` names the path in the message ("--input").
std::string resolve_hf_weights(const std::string& path, const char* what = "weights");

class HfTensors {
 public:
  // path: as resolve_hf_weights. An index is refused, naming the file and
  // the tensor, when its shards disagree with it: a shard the map names is
  // missing or not safetensors, a tensor the map places in a shard is not
  // there, a shard holds a tensor the map does not name, a tensor is in two
  // shards, or metadata.total_size is not the tensors' data bytes.
  explicit HfTensors(const std::string& path);

  // The file or index read, for messages about the whole checkpoint.
  const std::string& source() const { return source_; }
  bool sharded() const { return files_.size() > 1 || source_.ends_with(".index.json"); }

  // Every tensor, by name, whichever shard holds it.
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  const SafetensorsEntry& at(const std::string& name) const;
  // The file holding the tensor (a shard's path, for messages about it).
  const std::string& file_of(const std::string& name) const;
  // The tensor as fp32, read from its file now.
  std::vector<float> to_f32(const std::string& name) const;

 private:
  void open_shards(const std::string& index_path);
  std::string source_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;  // headers only
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, const SafetensorsFile*> where_;
};

}  // namespace tessera::ckpt

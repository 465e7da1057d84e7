// safetensors (Hugging Face): 8-byte little-endian header length N, N bytes
// of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, optional
// "__metadata__": {string: string}}, then the tensors' bytes, offsets
// relative to the end of the header. We write F32; we read F32, F16, BF16.
// A file is opened by its header alone and each tensor read when asked for,
// so importing a model holds one tensor at a time, not the whole file (or
// every shard of a sharded checkpoint, hf_tensors.h).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tessera::ckpt {

struct SafetensorsEntry {
  std::string dtype;           // "F32", "F16", "BF16", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range within the data section
  int64_t numel() const;  // throws tessera::Error if the shape's product overflows
};

class SafetensorsWriter {
 public:
  // data (numel of shape) is copied when write() runs, not now: keep it alive.
  void add(const std::string& name, std::vector<int64_t> shape, const float* data);
  void set_metadata(const std::string& key, const std::string& value) { meta_[key] = value; }
  // Writes the file atomically (temporary, fsync, rename).
  void write(const std::string& path) const;

  // The tensors' names in the order they were added, and their data bytes
  // (what an index's metadata.total_size sums).
  std::vector<std::string> names() const;
  uint64_t tensor_bytes() const;
  // The tensors cut into consecutive writers of at most max_bytes of data
  // each, by Hugging Face's rule (huggingface_hub's
  // split_state_dict_into_shards_factory): in order, a new shard when the
  // next tensor would pass the limit, a tensor larger than the limit alone
  // in its own. Each keeps this writer's metadata.
  std::vector<SafetensorsWriter> split(uint64_t max_bytes) const;

 private:
  struct Item {
    std::string name;
    std::vector<int64_t> shape;
    const float* data;
    uint64_t bytes() const;  // F32 data bytes
  };
  std::vector<Item> items_;
  std::map<std::string, std::string> meta_;
};

class SafetensorsFile {
 public:
  // Reads the header; checks it and every tensor's byte range against the
  // file's size. The tensors' bytes are read by to_f32.
  explicit SafetensorsFile(const std::string& path);

  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return meta_; }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  const SafetensorsEntry& at(const std::string& name) const;
  // The tensor as fp32 (converted from F16/BF16), read from the file now.
  std::vector<float> to_f32(const std::string& name) const;
  // The data bytes of every tensor together.
  uint64_t tensor_bytes() const;
  const std::string& path() const { return path_; }

 private:
  void check_no_overlap() const;
  std::string path_;
  uint64_t data_start_ = 0;  // 8 + header length
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> meta_;
};

}  // namespace tessera::ckpt

// safetensors (Hugging Face): 8-byte little-endian header length N, N bytes
// of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, optional
// "__metadata__": {string: string}}, then the tensors' bytes, offsets
// relative to the end of the header. We write F32; we read F32, F16, BF16.
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

 private:
  struct Item {
    std::string name;
    std::vector<int64_t> shape;
    const float* data;
  };
  std::vector<Item> items_;
  std::map<std::string, std::string> meta_;
};

class SafetensorsFile {
 public:
  // Reads the whole file; checks the header and every tensor's byte range.
  explicit SafetensorsFile(const std::string& path);

  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return meta_; }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  const SafetensorsEntry& at(const std::string& name) const;
  // The tensor as fp32 (converted from F16/BF16).
  std::vector<float> to_f32(const std::string& name) const;
  const std::string& path() const { return path_; }

 private:
  void check_no_overlap() const;
  std::string path_;
  std::string bytes_;       // the whole file
  uint64_t data_start_ = 0;  // 8 + header length
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> meta_;
};

}  // namespace tessera::ckpt

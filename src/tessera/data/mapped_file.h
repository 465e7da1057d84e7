// A read-only memory map of a whole file (RAII, move-only). Token files are
// mapped rather than read so a corpus larger than memory costs only the pages
// the sampler touches, and every rank on a node shares one page cache.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::data {

class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);  // throws tessera::Error naming path
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;  // (size_,) bytes; nullptr for an empty file
  size_t size_ = 0;
};

}  // namespace tessera::data

// A read-only memory map of a whole file (RAII, move-only). Token files are
// mapped rather than read so a corpus larger than memory costs only the pages
// the sampler touches, and every rank on a node shares one page cache.
//
// Only regular files are mapped (a named pipe would block the open forever).
// A mapped file that shrinks underneath us turns the next touch of a page
// past its new end into SIGBUS, so readers call check_unchanged() before
// touching the map: it compares the open file's size with the mapped size
// and throws a clear error instead.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::data {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws tessera::Error naming path and `what` (the file's role).
  explicit MappedFile(const std::string& path, const char* what = "token data");
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Throws (naming the file) if the file's size is no longer the mapped
  // size: it was truncated or rewritten in place while in use. One fstat.
  void check_unchanged() const;

 private:
  void release();
  std::string path_;
  const uint8_t* data_ = nullptr;  // (size_,) bytes; nullptr for an empty file
  size_t size_ = 0;
  int fd_ = -1;  // kept open so check_unchanged sees this file, even if renamed over
};

}  // namespace tessera::data

// File IO that survives a crash: every byte of a checkpoint reaches the disk
// (fsync) before the rename that makes it visible, and the rename itself is
// made durable by syncing the directory that holds it. Errors throw
// tessera::Error naming the path.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::ckpt {

// A file written sequentially, with a running CRC32C and byte count.
class DurableWriter {
 public:
  explicit DurableWriter(const std::string& path);  // creates or truncates
  ~DurableWriter();
  DurableWriter(const DurableWriter&) = delete;
  DurableWriter& operator=(const DurableWriter&) = delete;

  void write(const void* data, size_t n);
  // fsync and close; throws if either fails (a full disk shows up here).
  void close();

  uint64_t bytes() const { return bytes_; }
  uint32_t crc() const { return crc_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  uint32_t crc_ = 0;
};

// fsync a directory, so entries created or renamed in it are durable.
void fsync_dir(const std::string& dir);

// Write `content` to `path` and fsync it.
void write_file_durable(const std::string& path, const std::string& content);

// Replace `path` atomically: write a sibling temporary, fsync, rename over
// `path`, fsync the directory. Readers see the old or the new file, never a mix.
void write_file_atomic(const std::string& path, const std::string& content);

std::string read_file(const std::string& path);

// CRC32C and size of a whole file, read in large blocks.
uint32_t crc32c_file(const std::string& path, uint64_t* size);

// Read exactly n bytes at byte offset `offset` of an open file (pread loop).
void read_exact(int fd, void* out, size_t n, uint64_t offset, const std::string& path);

}  // namespace tessera::ckpt

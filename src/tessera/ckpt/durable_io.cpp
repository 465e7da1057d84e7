#include "tessera/ckpt/durable_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "tessera/ckpt/crc32c.h"
#include "tessera/core/error.h"
#include "tessera/core/output_file.h"
#include "tessera/core/regular_file.h"

namespace tessera::ckpt {

namespace {

[[noreturn]] void fail_errno(const char* what, const std::string& path) {
  fail("{} {}: {}", what, path, std::strerror(errno));
}

}  // namespace

DurableWriter::DurableWriter(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail_errno("cannot create", path);
}

DurableWriter::~DurableWriter() {
  if (fd_ >= 0) ::close(fd_);  // abandoned (an exception): the staging dir is discarded anyway
}

void DurableWriter::write(const void* data, size_t n) {
  crc_ = crc32c_update(crc_, data, n);
  bytes_ += n;
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail_errno("cannot write", path_);
    }
    p += w;
    n -= size_t(w);
  }
}

void DurableWriter::close() {
  if (fd_ < 0) return;
  if (::fsync(fd_) != 0) fail_errno("cannot fsync", path_);
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail_errno("cannot close", path_);
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_errno("cannot open directory", dir);
  // Some file systems (e.g. certain network mounts) refuse fsync on a
  // directory; EINVAL there means "nothing to do", not data loss.
  if (::fsync(fd) != 0 && errno != EINVAL) {
    ::close(fd);
    fail_errno("cannot fsync directory", dir);
  }
  ::close(fd);
}

void write_file_durable(const std::string& path, const std::string& content) {
  DurableWriter w(path);
  w.write(content.data(), content.size());
  w.close();
}

void write_file_atomic(const std::string& path, const std::string& content) {
  write_output_file(path, content, "file");
}

std::string read_file(const std::string& path) {
  // A named pipe in a checkpoint directory would block here forever.
  return read_regular_file(path, "file");
}

uint32_t crc32c_file(const std::string& path, uint64_t* size) {
  int fd = open_regular_file(path, "file");
  std::vector<char> buf(size_t(4) << 20);
  uint32_t crc = 0;
  uint64_t n = 0;
  for (;;) {
    ssize_t r = ::read(fd, buf.data(), buf.size());
    if (r < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      fail_errno("cannot read", path);
    }
    if (r == 0) break;
    crc = crc32c_update(crc, buf.data(), size_t(r));
    n += uint64_t(r);
  }
  ::close(fd);
  if (size) *size = n;
  return crc;
}

void read_exact(int fd, void* out, size_t n, uint64_t offset, const std::string& path) {
  char* p = static_cast<char*>(out);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, off_t(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      fail_errno("cannot read", path);
    }
    if (r == 0) fail("{}: unexpected end of file at byte {}", path, offset);
    p += r;
    n -= size_t(r);
    offset += uint64_t(r);
  }
}

}  // namespace tessera::ckpt

// Output files the user named (--save, --metrics-file, --trace, plan --json,
// bench peak --output, tokenize --output, ...): checked before the work that
// fills them, written so that a device or a pipe is never replaced
// (OutputFile), and every write checked after it.
//
// A long run that trains for hours and then cannot write its result has
// lost those hours; so each output is created (with its parent directories)
// and opened for writing up front, and a path that cannot be written is one
// clear line naming the flag. Later, a write that fails (a full disk, a
// quota) is an error, never a silently truncated file: writes go through
// write_all, and fflush/fclose results are checked (the kernel often
// reports ENOSPC only at the flush or the close).
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "tessera/core/error.h"

namespace tessera {

// Create `path`'s parent directories; throws naming `flag`.
inline void create_parent_dirs(const std::string& path, const char* flag) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  TESSERA_CHECK(!ec, "{} {}: cannot create directory {}: {}", flag, path, parent.string(),
                ec.message());
}

// Throws unless the file `path` can be opened for writing: parents are
// created, a directory is refused, a named pipe without a reader is refused
// rather than waited on (O_NONBLOCK). The file's content is left alone, and
// a file this check had to create is removed again (the real write creates
// it). Devices such as /dev/null and /dev/full pass: they open for writing.
inline void check_output_file(const std::string& path, const char* flag) {
  TESSERA_CHECK(!path.empty(), "{}: empty path", flag);
  create_parent_dirs(path, flag);
  struct stat st {};
  const bool existed = ::stat(path.c_str(), &st) == 0;
  TESSERA_CHECK(!existed || !S_ISDIR(st.st_mode), "{} {}: is a directory", flag, path);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int e = errno;
    if (e == ENXIO) fail("{} {}: is a named pipe with no reader", flag, path);
    fail("{} {}: cannot open for writing: {}", flag, path, std::strerror(e));
  }
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
}

// Throws unless files can be created in directory `dir` (created if
// missing): a probe file named with `tag` (unique per process and rank) is
// written and removed.
inline void check_output_dir(const std::string& dir, const char* flag, const std::string& tag) {
  TESSERA_CHECK(!dir.empty(), "{}: empty path", flag);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  TESSERA_CHECK(!ec, "{} {}: cannot create the directory: {}", flag, dir, ec.message());
  TESSERA_CHECK(std::filesystem::is_directory(dir, ec), "{} {}: is not a directory", flag, dir);
  const std::string probe = (std::filesystem::path(dir) / (".write-test-" + tag)).string();
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  TESSERA_CHECK(fd >= 0, "{} {}: cannot create files there: {}", flag, dir, std::strerror(errno));
  const bool wrote = ::write(fd, "x", 1) == 1;
  const int e = errno;
  ::close(fd);
  ::unlink(probe.c_str());
  TESSERA_CHECK(wrote, "{} {}: cannot write there: {}", flag, dir, std::strerror(e));
}

// One output the user named, written so that it never destroys what the
// path names:
// - a regular file or a missing path is written atomically: the bytes go to
//   a temporary beside it ("PATH.tmp-PID"), are fsynced, and only commit()
//   renames the temporary over the path (and fsyncs the directory). A
//   failure or an exception before commit() removes the temporary and leaves
//   the old file as it was; a reader sees the old file or the new, never a mix.
// - a device (/dev/null, /dev/stdout), a named pipe or a socket is written
//   through: opened in place and never renamed over (as root, a rename over
//   /dev/null would replace the device with a regular file). A pipe without
//   a reader is refused, not waited on.
// - a directory is refused.
// A symlink to a regular file replaces the file it points to, not the link.
class OutputFile {
 public:
  OutputFile(const std::string& path, const char* flag) : path_(path), flag_(flag) {
    TESSERA_CHECK(!path.empty(), "{}: empty path", flag);
    struct stat st {};
    const bool exists = ::stat(path.c_str(), &st) == 0;
    TESSERA_CHECK(!exists || !S_ISDIR(st.st_mode), "{} {}: is a directory", flag, path);
    if (exists && !S_ISREG(st.st_mode)) {
      fd_ = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd_ < 0) {
        const int e = errno;
        if (e == ENXIO) fail("{} {}: is a named pipe with no reader", flag, path);
        fail("{} {}: cannot open for writing: {}", flag, path, std::strerror(e));
      }
      ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
      return;
    }
    create_parent_dirs(path, flag);
    // The real file behind a symlink, so the rename replaces it, not the link.
    std::error_code ec;
    target_ = exists ? std::filesystem::canonical(path, ec).string() : path;
    if (ec) target_ = path;
    tmp_ = target_ + ".tmp-" + std::to_string(::getpid());
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    TESSERA_CHECK(fd_ >= 0, "{} {}: cannot create {}: {}", flag, path, tmp_, std::strerror(errno));
    // Keep the old file's permissions (a temporary starts at 0644 less the umask).
    if (exists) ::fchmod(fd_, st.st_mode & 07777);
  }
  ~OutputFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!tmp_.empty() && !committed_) ::unlink(tmp_.c_str());
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // True when the path is replaced whole at commit (a regular file or a new one).
  bool atomic() const { return !tmp_.empty(); }
  // True when the output can be sought (a file, /dev/null; not a pipe).
  bool seekable() const { return ::lseek(fd_, 0, SEEK_CUR) >= 0; }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // The temporary that commit() renames (empty when written through): a
  // caller may check what it wrote before committing it.
  const std::string& staging() const { return tmp_; }

  void write(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      TESSERA_CHECK(w > 0, "{} {}: write failed ({}): not written", flag_, path_,
                    std::strerror(errno));
      p += w;
      n -= size_t(w);
    }
  }
  void write(std::string_view s) { write(s.data(), s.size()); }
  // Rewrite `n` bytes at `offset` (a header whose counts are known last).
  void write_at(const void* data, size_t n, off_t offset) {
    TESSERA_CHECK(::pwrite(fd_, data, n, offset) == ssize_t(n), "{} {}: write failed ({})",
                  flag_, path_, std::strerror(errno));
  }

  // Make the output final: fsync and rename a temporary over the path, or
  // just close a device or pipe. Throws (the old file kept) on any failure.
  void commit() {
    TESSERA_CHECK(fd_ >= 0, "{} {}: committed twice", flag_, path_);
    const bool synced = !atomic() || ::fsync(fd_) == 0;
    const int e = errno;
    const bool closed = ::close(fd_) == 0;
    fd_ = -1;
    TESSERA_CHECK(synced && closed, "{} {}: write failed ({}): not written", flag_, path_,
                  std::strerror(synced ? errno : e));
    if (!atomic()) return;
    TESSERA_CHECK(::rename(tmp_.c_str(), target_.c_str()) == 0, "{} {}: cannot rename {} over it: {}",
                  flag_, path_, tmp_, std::strerror(errno));
    committed_ = true;
    const std::filesystem::path dir = std::filesystem::path(target_).parent_path();
    const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {  // the rename's durability is best effort; the data is synced
      ::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  std::string path_, target_, tmp_;
  const char* flag_;
  int fd_ = -1;
  bool committed_ = false;
};

// Write `content` to `path` as OutputFile does (atomically over a regular
// file, through a device or pipe), checking every step. Throws naming `flag`.
inline void write_output_file(const std::string& path, const std::string& content,
                              const char* flag) {
  OutputFile out(path, flag);
  out.write(content);
  out.commit();
}

}  // namespace tessera

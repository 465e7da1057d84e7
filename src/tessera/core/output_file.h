// Output files the user named (--save, --metrics-file, --trace, plan --json,
// bench peak --output): checked before the work that fills them, and every
// write checked after it.
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

// Write `content` to `path` (created or truncated, parents created) and
// check every step, including the flush and the close. Throws naming `flag`.
inline void write_output_file(const std::string& path, const std::string& content,
                              const char* flag) {
  create_parent_dirs(path, flag);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  TESSERA_CHECK(f, "{} {}: cannot open for writing: {}", flag, path, std::strerror(errno));
  const bool wrote = std::fwrite(content.data(), 1, content.size(), f) == content.size();
  const bool flushed = wrote && std::fflush(f) == 0;
  const int e = errno;
  const bool closed = std::fclose(f) == 0;
  TESSERA_CHECK(wrote && flushed && closed, "{} {}: write failed ({}): the file is incomplete",
                flag, path, std::strerror(wrote && flushed ? errno : e));
}

}  // namespace tessera

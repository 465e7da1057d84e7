// Opening an input file the user named (token data, tokenizer, config,
// checkpoint): only a regular file will do. A named pipe blocks open() and
// read() forever, and a directory or a device reads as garbage or not at
// all; both must be one clear line naming the file instead.
//
// open_regular_file opens with O_NONBLOCK (so a FIFO cannot block the open),
// checks the opened descriptor with fstat (no window between the check and
// the open), then clears O_NONBLOCK for ordinary reads.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "tessera/core/error.h"

namespace tessera {

// What a non-regular file is, for the message.
inline const char* file_kind_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a named pipe";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

// A read-only descriptor of the regular file `path` (close it yourself).
// `what` names the role in the message: "token data", "tokenizer", ...
inline int open_regular_file(const std::string& path, const char* what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  TESSERA_CHECK(fd >= 0, "{} {}: cannot open: {}", what, path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    fail("{} {}: cannot stat: {}", what, path, std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{} {}: is {}, not a regular file", what, path, file_kind_name(st.st_mode));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

// Throws unless `path` names a regular file (following symlinks); for
// callers that open it some other way afterwards (a library's parse_file).
inline void require_regular_file(const std::string& path, const char* what) {
  ::close(open_regular_file(path, what));
}

// The whole content of a regular file.
inline std::string read_regular_file(const std::string& path, const char* what) {
  int fd = open_regular_file(path, what);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      ::close(fd);
      fail("{} {}: cannot read: {}", what, path, std::strerror(e));
    }
    if (r == 0) break;
    out.append(buf, size_t(r));
  }
  ::close(fd);
  return out;
}

}  // namespace tessera

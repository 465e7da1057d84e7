#include "tessera/data/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "tessera/core/error.h"

namespace tessera::data {

namespace fs = std::filesystem;

namespace {

void write_and_sync(const std::string& path, const std::string& content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TESSERA_CHECK(fd >= 0, "cannot write {}: {}", path, std::strerror(errno));
  const char* p = content.data();
  size_t n = content.size();
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      int e = errno;
      ::close(fd);
      fail("error writing {}: {}", path, std::strerror(e));
    }
    p += w;
    n -= size_t(w);
  }
  const bool synced = ::fsync(fd) == 0;
  const int e = errno;
  const bool closed = ::close(fd) == 0;
  TESSERA_CHECK(synced && closed, "error writing {}: {}", path, std::strerror(synced ? errno : e));
}

void sync_dir(const fs::path& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // durability of the rename is best effort; the data is synced
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void replace_files_atomically(const std::vector<std::pair<std::string, std::string>>& files) {
  const std::string suffix = ".tmp-" + std::to_string(::getpid());
  std::vector<std::string> temps;
  try {
    for (const auto& [path, content] : files) {
      temps.push_back(path + suffix);
      write_and_sync(temps.back(), content);
    }
  } catch (...) {
    std::error_code ec;
    for (const auto& t : temps) fs::remove(t, ec);
    throw;
  }
  for (size_t i = 0; i < files.size(); ++i) {
    std::error_code ec;
    fs::rename(temps[i], files[i].first, ec);
    TESSERA_CHECK(!ec, "cannot rename {} to {}: {}", temps[i], files[i].first, ec.message());
    sync_dir(fs::path(files[i].first).parent_path());
  }
}

}  // namespace tessera::data

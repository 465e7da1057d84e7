#include "tessera/ckpt/save_dir_owner.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "tessera/ckpt/durable_io.h"
#include "tessera/ckpt/metadata.h"
#include "tessera/ckpt/step_dirs.h"
#include "tessera/core/error.h"

namespace tessera::ckpt {

namespace fs = std::filesystem;

namespace {

// An absolute path without "." / ".." / symlinks / a trailing "/", so that
// "ckpt", "./ckpt/" and "/abs/ckpt" compare equal.
fs::path normalized(const std::string& p) {
  std::error_code ec;
  fs::path n = fs::weakly_canonical(fs::absolute(p), ec);
  if (ec) n = fs::absolute(p).lexically_normal();
  if (n.filename().empty()) n = n.parent_path();
  return n;
}

// How the run relates to save_dir: not resuming from it (nullopt), resuming
// from its latest (-1), or from its step N (N).
std::optional<int64_t> resume_point(const std::string& save_dir, const std::string& load_dir) {
  if (load_dir.empty()) return std::nullopt;
  const fs::path save = normalized(save_dir), load = normalized(load_dir);
  if (load == save) return -1;
  if (load.parent_path() == save)
    if (auto step = parse_step_dir(load.filename().string())) return *step;
  return std::nullopt;
}

std::string describe(const std::vector<std::pair<int64_t, std::string>>& steps) {
  const std::string newest = fs::path(steps.front().second).filename().string();
  return steps.size() == 1 ? newest
                           : fmt::format("{} steps, the newest {}", steps.size(), newest);
}

// "pid N on HOST" as the holder wrote it into the lock file; it writes
// right after taking the lock, so a just-started holder gets a moment.
std::string lock_holder(int fd) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    char buf[256] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    std::string text(buf, n > 0 ? size_t(n) : 0);
    if (const size_t nl = text.find('\n'); nl != std::string::npos) return text.substr(0, nl);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "another process";
}

[[noreturn]] void refuse_second_writer(int fd, const std::string& save_dir, const char* flag) {
  fail("{} {} is being written by {}: one run writes a checkpoint directory at a time; "
       "wait for it, or save elsewhere",
       flag, save_dir, lock_holder(fd));
}

// flock() retried on EINTR; 0 or the errno.
int flock_now(int fd, int op) {
  while (::flock(fd, op | LOCK_NB) != 0)
    if (errno != EINTR) return errno;
  return 0;
}

}  // namespace

void check_no_writer(const std::string& save_dir, const char* flag) {
  const std::string path = (fs::path(save_dir) / kWriterLockFile).string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;  // no lock file: no writer ever (the writer's own checks say the rest)
  const int e = flock_now(fd, LOCK_SH);
  if (e == EWOULDBLOCK) {
    try {
      refuse_second_writer(fd, save_dir, flag);
    } catch (...) {
      ::close(fd);
      throw;
    }
  }
  ::close(fd);  // drops the shared lock
}

SaveDirLock::SaveDirLock(const std::string& save_dir, const char* flag) {
  const std::string path = (fs::path(save_dir) / kWriterLockFile).string();
  std::error_code ec;
  fs::create_directories(save_dir, ec);  // a failure shows in the open below
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  TESSERA_CHECK(fd_ >= 0, "{} {}: cannot create the lock file {}: {}", flag, save_dir, path,
                std::strerror(errno));
  if (const int e = flock_now(fd_, LOCK_EX); e != 0) {
    const int fd = fd_;
    fd_ = -1;
    try {
      if (e == EWOULDBLOCK) refuse_second_writer(fd, save_dir, flag);
      fail("{} {}: cannot lock {}: {}", flag, save_dir, path, std::strerror(e));
    } catch (...) {
      ::close(fd);
      throw;
    }
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string who = fmt::format("pid {} on {}\n", ::getpid(), host);
  // Best effort: the lock itself is the flock; the text only names the holder.
  if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, who.data(), who.size(), 0) == ssize_t(who.size()))
    ::fdatasync(fd_);
}

SaveDirLock::~SaveDirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor drops the flock
}

SaveDirLock& SaveDirLock::operator=(SaveDirLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

std::vector<std::pair<int64_t, std::string>> foreign_steps(const std::string& save_dir,
                                                           const std::string& load_dir) {
  auto steps = list_steps(save_dir);  // newest first
  const std::optional<int64_t> from = resume_point(save_dir, load_dir);
  if (!from) return steps;
  if (*from < 0) return {};
  std::vector<std::pair<int64_t, std::string>> newer;
  for (const auto& s : steps)
    if (s.first > *from) newer.push_back(s);
  return newer;
}

void check_save_dir_owner(const std::string& save_dir, const std::string& load_dir,
                          bool overwrite) {
  if (overwrite) return;
  const auto foreign = foreign_steps(save_dir, load_dir);
  if (foreign.empty()) return;
  if (resume_point(save_dir, load_dir))
    fail("--save {} holds checkpoints newer than --load {} ({}): this run would replace them "
         "step by step; pass --overwrite-save to delete them first, or save elsewhere",
         save_dir, load_dir, describe(foreign));
  fail("--save {} already holds another run's checkpoints ({}): resume that run with --load {}, "
       "pass --overwrite-save to delete them, or choose another directory",
       save_dir, describe(foreign), save_dir);
}

void check_finetune_save_dir(const std::string& save_dir, const std::string& load_dir) {
  if (!resume_point(save_dir, load_dir)) return;
  const auto steps = list_steps(save_dir);  // newest first
  TESSERA_CHECK(steps.empty() || steps.front().first == 0,
                "--save {} is where --finetune loads from, and it holds a run's checkpoints ({}): "
                "the fine-tune starts again at step 1 and would write among them; save elsewhere",
                save_dir, describe(steps));
}

int64_t remove_foreign_steps(const std::string& save_dir, const std::string& load_dir) {
  const auto foreign = foreign_steps(save_dir, load_dir);
  if (foreign.empty()) return 0;
  // `latest` first: from here on no reader resolves to a step being deleted.
  const fs::path latest = fs::path(save_dir) / kLatestFile;
  const std::optional<int64_t> from = resume_point(save_dir, load_dir);
  std::error_code ec;
  if (from && *from >= 0)
    write_file_atomic(latest.string(), normalized(load_dir).filename().string() + "\n");
  else
    fs::remove(latest, ec);
  std::vector<fs::path> trash;
  for (const auto& [step, path] : foreign) {
    const fs::path to = fs::path(save_dir) / trash_name(fs::path(path).filename().string());
    fs::rename(path, to, ec);
    TESSERA_CHECK(!ec, "--overwrite-save: cannot remove {}: {}", path, ec.message());
    trash.push_back(to);
  }
  fsync_dir(save_dir);
  for (const auto& p : trash) fs::remove_all(p, ec);
  return int64_t(foreign.size());
}

}  // namespace tessera::ckpt

#include "tessera/train/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/core.h>

#include "tessera/core/timer.h"
#include "tessera/train/interval_meter.h"

namespace tessera {

Progress::Progress(int64_t total, bool enabled)
    : total_(total), tty_(enabled && isatty(STDERR_FILENO)), start_(now_seconds()) {}

Progress::~Progress() { finish(); }

void Progress::clear() {
  if (drawn_) fmt::print(stderr, "\r\033[2K");
  drawn_ = false;
}

void Progress::update(int64_t done, const std::string& note) {
  if (!tty_) return;
  const int width = 30;
  int filled = total_ > 0 ? int(width * done / total_) : width;
  double elapsed = now_seconds() - start_;
  double eta = done > 0 ? elapsed * double(total_ - done) / double(done) : 0;
  clear();
  fmt::print(stderr, "[{:=<{}}{:<{}}] {}/{} ETA {} {}", "", filled, "", width - filled, done,
             total_, format_duration(eta), note);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::println(const std::string& line) {
  clear();
  fmt::print("{}\n", line);
  std::fflush(stdout);
}

void Progress::finish() { clear(); }

}  // namespace tessera

// Progress: a bar with ETA on a terminal, nothing extra when the output is a
// file or pipe (the log lines are enough there).
#pragma once
#include <cstdint>
#include <string>

namespace tessera {

class Progress {
 public:
  // enabled: the caller's wish; the bar is drawn only if stderr is a terminal.
  Progress(int64_t total, bool enabled);
  ~Progress();

  // Redraws the bar after `done` of `total` units; `note` follows the ETA.
  void update(int64_t done, const std::string& note);
  // Prints a line above the bar (or plainly when there is no bar).
  void println(const std::string& line);
  void finish();

 private:
  void clear();
  int64_t total_;
  bool tty_;
  bool drawn_ = false;
  double start_;
};

}  // namespace tessera

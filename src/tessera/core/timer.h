// Wall-clock timing for step metrics and benchmarks.
#pragma once
#include <chrono>

namespace tessera {

inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

struct Stopwatch {
  double start = now_seconds();
  double elapsed() const { return now_seconds() - start; }
  void reset() { start = now_seconds(); }
};

}  // namespace tessera

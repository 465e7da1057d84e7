// The numbers of a training log line: loss, ms/step, tokens/s, TFLOP/s and
// MFU are means over the steps since the previous line (--log-interval of
// them), not the last step alone, so one slow or lucky step does not stand
// for the interval; and the line ends with an ETA (from the run's mean step
// time so far, evaluations and saves included), whether or not the output
// is a terminal.
#pragma once
#include <cstdint>
#include <string>

#include "tessera/core/timer.h"
#include "tessera/train/step_stats.h"

namespace tessera {

class IntervalMeter {
 public:
  // steps: the steps this run will take (ETA's denominator).
  explicit IntervalMeter(int64_t steps) : steps_(steps) {}
  // Every step, in order.
  void add(const StepStats& s);
  // The log line for s, the last step added: the interval's means, then the
  // ETA; starts the next interval.
  std::string line(const StepStats& s);

 private:
  int64_t steps_;
  int64_t done_ = 0;       // steps added
  int64_t n_ = 0;          // steps in the current interval
  double loss_ = 0, seconds_ = 0, model_flops_ = 0, hardware_flops_ = 0;  // their sums
  Stopwatch run_;
};

// "42s", "3m05s", "1h02m".
std::string format_duration(double seconds);

}  // namespace tessera

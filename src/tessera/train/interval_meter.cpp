#include "tessera/train/interval_meter.h"

#include <fmt/format.h>

namespace tessera {

std::string format_duration(double s) {
  const int64_t t = int64_t(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t / 60) % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

void IntervalMeter::add(const StepStats& s) {
  ++done_;
  ++n_;
  loss_ += s.loss;
  seconds_ += s.seconds;
  model_flops_ += s.model_flops;
  hardware_flops_ += s.hardware_flops;
}

std::string IntervalMeter::line(const StepStats& s) {
  // One step standing for the interval's mean: tokens and FLOPs per step
  // are the same every step, so the mean step time gives the mean rates.
  StepStats mean = s;
  if (n_ > 0) {
    mean.loss = float(loss_ / double(n_));
    mean.seconds = seconds_ / double(n_);
    mean.model_flops = model_flops_ / double(n_);
    mean.hardware_flops = hardware_flops_ / double(n_);
  }
  std::string out = format_step_line(mean);
  if (n_ > 1) out += fmt::format(" | mean of {} steps", n_);
  const double per_step = done_ > 0 ? run_.elapsed() / double(done_) : 0;
  out += fmt::format(" | ETA {}", format_duration(per_step * double(steps_ - done_)));
  n_ = 0;
  loss_ = seconds_ = model_flops_ = hardware_flops_ = 0;
  return out;
}

}  // namespace tessera

#include "tessera/train/exit_conditions.h"

#include <fmt/core.h>

#include "tessera/core/timer.h"

namespace tessera {

namespace {
// Initialised before main() runs, as the library is loaded: the program's
// start as near as portable C++ gets (before MPI_Init, data and model setup,
// which all count against a scheduler's wall time).
const double g_program_start = now_seconds();
}  // namespace

double seconds_since_program_start() { return now_seconds() - g_program_start; }

ExitConditions::ExitConditions(const TrainConfig& cfg)
    : watch_signals_(cfg.exit_signal_handler),
      duration_mins_(cfg.exit_duration_in_mins),
      interval_(cfg.exit_interval) {
  if (watch_signals_) signals_ = std::make_unique<ExitSignals>();
}

ExitConditions::~ExitConditions() = default;

std::optional<EarlyExit> ExitConditions::check(int64_t step, comm::Communicator& world) const {
  EarlyExit out;
  out.step = step;
  if (watch_signals_ || duration_mins_ > 0) {
    const double minutes = seconds_since_program_start() / 60.0;
    // (2,): the signal caught here (0: none) and whether time is up here.
    float flags[2] = {float(watch_signals_ ? ExitSignals::received() : 0),
                      duration_mins_ > 0 && minutes >= duration_mins_ ? 1.0f : 0.0f};
    world.all_reduce(flags, 2, Precision::Fp32, comm::ReduceOp::Max);
    if (flags[0] > 0) {
      out.signal = int(flags[0]);
      out.reason = fmt::format("{} (--exit-signal-handler)", signal_name(out.signal));
      return out;
    }
    if (flags[1] > 0) {
      out.reason = fmt::format("--exit-duration-in-mins {} reached ({:.2f} min since start)",
                               duration_mins_, minutes);
      return out;
    }
  }
  if (interval_ > 0 && step % interval_ == 0) {
    out.reason = fmt::format("--exit-interval {}", interval_);
    return out;
  }
  return std::nullopt;
}

}  // namespace tessera

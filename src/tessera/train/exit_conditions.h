// ExitConditions: when a training run stops before --train-iters, Megatron's
// way (its flag names and meanings):
//   --exit-signal-handler      on SIGTERM or SIGINT (train/exit_signals.h),
//   --exit-duration-in-mins M  once M minutes have passed since the program
//                              started (a scheduler's wall-time limit, less
//                              the time a save takes),
//   --exit-interval N          after every step that is a multiple of N.
// The trainer asks after each step; it then saves (with --save) and returns
// the EarlyExit, and `tessera train` prints it and exits: 128 + the signal's
// number after a signal (the shell's convention for "ended by that signal"),
// 0 after a planned stop (as Megatron: a job chain's next job resumes).
//
// Every rank must stop after the same step, or the ones that go on wait in a
// collective for the ones that left. A signal may reach some ranks only, and
// clocks are read at slightly different moments, so those two are agreed: one
// all-reduce (max) of two floats over the world per step, only when they are
// watched. The interval is the same on every rank by arithmetic.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tessera/comm/communicator.h"
#include "tessera/train/exit_signals.h"
#include "tessera/train/train_config.h"

namespace tessera {

struct EarlyExit {
  int64_t step = 0;        // the last step run
  int signal = 0;          // the signal that asked for it (0: a planned stop)
  std::string reason;      // e.g. "SIGTERM (--exit-signal-handler)"
  std::string checkpoint;  // where the state after `step` was saved ("" without --save)
  int exit_code() const { return signal ? 128 + signal : 0; }
};

// Seconds since the program started (static initialisation of the train
// library), the clock of --exit-duration-in-mins.
double seconds_since_program_start();

class ExitConditions {
 public:
  // Catches SIGTERM and SIGINT from here on when cfg.exit_signal_handler.
  explicit ExitConditions(const TrainConfig& cfg);
  ~ExitConditions();

  // After `step`: the reason every rank stops now, or nullopt. Collective
  // over `world` when a signal or a duration is watched: call it on every
  // rank after every step.
  std::optional<EarlyExit> check(int64_t step, comm::Communicator& world) const;

 private:
  bool watch_signals_;
  double duration_mins_;
  int64_t interval_;
  std::unique_ptr<ExitSignals> signals_;
};

}  // namespace tessera

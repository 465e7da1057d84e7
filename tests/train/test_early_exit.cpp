// Stopping before --train-iters (issue 15 defect 7), in one process on the
// local communicator: --exit-interval, --exit-duration-in-mins and
// --exit-signal-handler stop after a whole step, save it, and a run resumed
// from that checkpoint gives the uninterrupted run's losses bit for bit.
// (The multi-rank cases, a signal to the launcher or to one rank, are in
// tests/scripts/test_mpi_faults.sh.)
#include <gtest/gtest.h>

#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "expect_error.h"
#include "tiny_training.h"
#include "tessera/train/exit_conditions.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

struct Scratch {
  fs::path path = fs::temp_directory_path() / ("tessera_early_exit_" + std::to_string(::getpid()));
  Scratch() { fs::remove_all(path); }
  ~Scratch() { fs::remove_all(path); }
};

TrainConfig config(const std::string& save_dir) {
  TrainConfig c = test::tiny_train_config(0, 1, 2, /*dropout=*/0.1f);
  c.train_iters = 12;
  c.save_dir = save_dir;
  return c;
}

// Runs `cfg` to its end or its early exit; the loss of every step it ran.
std::optional<EarlyExit> run(const TrainConfig& cfg, std::map<int64_t, float>& losses,
                             int64_t raise_at = 0, int signal = SIGTERM) {
  auto data = test::tiny_train_data(cfg);
  Trainer t(cfg, *data);
  return t.run([&](const StepStats& s) {
    losses[s.step] = s.loss;
    if (s.step == raise_at) std::raise(signal);
  });
}

std::map<int64_t, float> straight_losses() {
  TrainConfig c = config("");
  std::map<int64_t, float> losses;
  EXPECT_FALSE(run(c, losses).has_value());
  EXPECT_EQ(losses.size(), 12u);
  return losses;
}

TEST(EarlyExit, SignalStopsAfterTheStepSavesAndResumesBitForBit) {
  const std::map<int64_t, float> want = straight_losses();
  Scratch dir;
  TrainConfig c = config(dir.path.string());
  c.exit_signal_handler = true;
  std::map<int64_t, float> got;
  const std::optional<EarlyExit> stop = run(c, got, /*raise_at=*/5);
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ(stop->step, 5);
  EXPECT_EQ(stop->signal, SIGTERM);
  EXPECT_EQ(stop->exit_code(), 128 + SIGTERM);
  EXPECT_NE(stop->reason.find("SIGTERM (--exit-signal-handler)"), std::string::npos) << stop->reason;
  EXPECT_EQ(fs::path(stop->checkpoint).filename(), "step_000005");
  EXPECT_EQ(got.size(), 5u);
  // The handler is gone with the run: SIGTERM would kill again.
  struct sigaction now {};
  sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);

  c.load_dir = dir.path.string();
  EXPECT_FALSE(run(c, got).has_value());  // runs 6..12
  ASSERT_EQ(got.size(), 12u);
  for (const auto& [step, loss] : want) EXPECT_EQ(got[step], loss) << "step " << step;
}

TEST(EarlyExit, SigintAlikeExit130) {
  Scratch dir;
  TrainConfig c = config(dir.path.string());
  c.exit_signal_handler = true;
  std::map<int64_t, float> got;
  const std::optional<EarlyExit> stop = run(c, got, /*raise_at=*/2, SIGINT);
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ(stop->step, 2);
  EXPECT_EQ(stop->exit_code(), 130);
  EXPECT_TRUE(fs::exists(dir.path / "step_000002"));
}

TEST(EarlyExit, ASignalDuringTheLastStepEndsTheRunNormally) {
  Scratch dir;
  TrainConfig c = config(dir.path.string());
  c.exit_signal_handler = true;
  std::map<int64_t, float> got;
  EXPECT_FALSE(run(c, got, /*raise_at=*/12).has_value());
  EXPECT_EQ(got.size(), 12u);
}

TEST(EarlyExit, IntervalStopsAtEachMultipleAndExits0) {
  const std::map<int64_t, float> want = straight_losses();
  Scratch dir;
  TrainConfig c = config(dir.path.string());
  c.exit_interval = 4;
  std::map<int64_t, float> got;
  std::optional<EarlyExit> stop = run(c, got);
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ(stop->step, 4);
  EXPECT_EQ(stop->exit_code(), 0);
  EXPECT_EQ(stop->reason, "--exit-interval 4");
  c.load_dir = dir.path.string();
  stop = run(c, got);  // Megatron's meaning: the step number, not steps run
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ(stop->step, 8);
  EXPECT_FALSE(run(c, got).has_value());  // 9..12: the end
  for (const auto& [step, loss] : want) EXPECT_EQ(got[step], loss) << "step " << step;
}

TEST(EarlyExit, DurationStopsAfterTheFirstStepPastItWithoutSave) {
  TrainConfig c = config("");
  c.exit_duration_in_mins = 1e-9;  // long past by the first step
  std::map<int64_t, float> got;
  const std::optional<EarlyExit> stop = run(c, got);
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ(stop->step, 1);
  EXPECT_EQ(stop->exit_code(), 0);
  EXPECT_TRUE(stop->checkpoint.empty());
  EXPECT_NE(stop->reason.find("--exit-duration-in-mins"), std::string::npos) << stop->reason;
}

TEST(EarlyExit, BadValuesNameTheFlag) {
  TrainConfig c = config("");
  c.exit_interval = -1;
  EXPECT_TRUE(test::throws_error_with([&] { c.validate(1); }, {"--exit-interval must be >= 0"}));
  c = config("");
  c.exit_duration_in_mins = -2;
  EXPECT_TRUE(test::throws_error_with([&] { c.validate(1); }, {"--exit-duration-in-mins"}));
  c.exit_duration_in_mins = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(test::throws_error_with([&] { c.validate(1); }, {"--exit-duration-in-mins"}));
}

}  // namespace
}  // namespace tessera

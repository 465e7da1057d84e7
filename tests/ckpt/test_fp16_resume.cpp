// --fp16 resume is bit-exact: the dynamic loss scaler's state (scale,
// growth and hysteresis trackers, skipped steps) travels in the checkpoint.
// The run starts at a scale of 2^32, so its first steps overflow and are
// skipped while the scale comes down; a resume that restarted the scaler
// would skip again and drift from the uninterrupted run.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ckpt_test_util.h"
#include "tiny_training.h"

namespace tessera {
namespace {

TrainConfig fp16_config(const std::string& save_dir) {
  TrainConfig c = test::tiny_train_config(0, 1, 2, 0.0f, Precision::Fp16);
  c.loss_scale.initial_scale = 4294967296.0f;  // 2^32: the first steps overflow
  c.loss_scale.hysteresis = 1;                 // back off at every overflow
  c.loss_scale.window = 4;                     // and grow again soon: both happen after the save
  c.train_iters = 40;
  c.save_dir = save_dir;
  return c;
}

TEST(Fp16Resume, ScalerStateTravelsInTheCheckpoint) {
  test::ScratchDir dir("fp16_resume");
  const TrainConfig cfg = fp16_config(dir.str());
  auto data = test::tiny_train_data(cfg);

  Trainer straight(cfg, *data);
  std::vector<StepStats> want;
  for (int64_t s = 1; s <= 40; ++s) want.push_back(straight.train_step(s));
  ASSERT_GE(want[19].skipped_steps, 1) << "the test needs skipped steps before the save";
  ASSERT_GT(want.back().skipped_steps, want[19].skipped_steps) << "and after it (growth overflows)";

  {
    Trainer first(cfg, *data);
    for (int64_t s = 1; s <= 20; ++s) first.train_step(s);
    first.save(20);
  }
  Trainer resumed(cfg, *data);
  ASSERT_EQ(resumed.load(dir.str()), 20);
  for (int64_t s = 21; s <= 40; ++s) {
    const StepStats got = resumed.train_step(s);
    const StepStats& w = want[size_t(s - 1)];
    EXPECT_EQ(got.loss, w.loss) << "step " << s;
    // A skipped step's norm is not finite: NaN must meet NaN.
    EXPECT_TRUE(std::isnan(w.grad_norm) ? std::isnan(got.grad_norm) : got.grad_norm == w.grad_norm)
        << "step " << s << ": " << got.grad_norm << " vs " << w.grad_norm;
    EXPECT_EQ(got.loss_scale, w.loss_scale) << "step " << s;
    EXPECT_EQ(got.skipped_steps, w.skipped_steps) << "step " << s;
  }
}

}  // namespace
}  // namespace tessera

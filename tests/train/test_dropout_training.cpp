// Dropout in the trainer, one process: it changes the run (the masks are
// really applied), it is deterministic (the same seed gives the same run bit
// for bit), validation runs without it, and the masks follow the samples,
// not the micro-batches: splitting the same global batch into micro-batches
// of 1, 2 or 4 sequences gives the same losses (to the reduction order).
#include <gtest/gtest.h>

#include <vector>

#include "tiny_training.h"

namespace tessera {
namespace {

std::vector<StepStats> run(float dropout, int64_t micro_batch, int64_t steps = 6) {
  TrainConfig c = test::tiny_train_config(0, 1, 2, dropout);
  c.par.micro_batch = micro_batch;
  c.validate(1);
  auto data = test::tiny_train_data(c);
  Trainer t(c, *data);
  std::vector<StepStats> out;
  for (int64_t s = 1; s <= steps; ++s) out.push_back(t.train_step(s));
  return out;
}

TEST(DropoutTraining, ChangesTheRunAndIsDeterministic) {
  const auto plain = run(0.0f, 2), a = run(0.2f, 2), b = run(0.2f, 2);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].loss, b[i].loss) << "step " << i + 1;
    EXPECT_EQ(a[i].grad_norm, b[i].grad_norm) << "step " << i + 1;
  }
  // Step 1 starts from the same weights; only the masks differ. At
  // initialisation every logit is near zero, so the loss moves little (ln V
  // either way) while the gradient moves a lot. Float noise is ~1e-7.
  EXPECT_GT(test::rel(a[0].loss, plain[0].loss), 1e-5);
  EXPECT_GT(test::rel(a[0].grad_norm, plain[0].grad_norm), 1e-3);
}

TEST(DropoutTraining, MasksFollowSamplesNotMicroBatches) {
  const auto ref = run(0.2f, 2);
  for (int64_t mb : {1, 4}) {
    const auto got = run(0.2f, mb);
    for (size_t i = 0; i < ref.size(); ++i)
      test::expect_step_matches(got[i], ref[i], int64_t(i) + 1,
                                "micro-batch " + std::to_string(mb));
  }
}

TEST(DropoutTraining, ValidationRunsWithoutDropout) {
  // Two models with the same weights and different dropout evaluate alike.
  TrainConfig c0 = test::tiny_train_config(0, 1, 2, 0.0f);
  TrainConfig c1 = test::tiny_train_config(0, 1, 2, 0.5f);
  auto d0 = test::tiny_train_data(c0);
  auto d1 = test::tiny_train_data(c1);
  Trainer t0(c0, *d0), t1(c1, *d1);
  EXPECT_EQ(t0.evaluate(), t1.evaluate());
}

}  // namespace
}  // namespace tessera

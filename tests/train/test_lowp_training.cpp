// --bf16 / --fp16 in the trainer, one process: the GEMMs really run in the
// low precision (step 1 differs from fp32), the run is deterministic, it
// learns, and after 50 steps its loss is within 2 % of the fp32 run's. The
// step records its precision and charges the operand casts to "cast".
#include <gtest/gtest.h>

#include <vector>

#include "tiny_training.h"

namespace tessera {
namespace {

// Random tokens at even positions, each followed by a fixed function of it:
// half the targets are learnable, so the loss falls from ln V towards
// ln V / 2 and stays far from 0 (relative comparisons mean something).
std::unique_ptr<SampledBatches> half_learnable_data(const TrainConfig& c) {
  const uint64_t V = uint64_t(c.model.vocab_size);
  std::vector<int32_t> tokens(8192);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = i % 2 == 0 ? int32_t(rng_u64(7, 0, i) % V)
                           : int32_t((uint64_t(tokens[i - 1]) * 5 + 3) % V);
  return std::make_unique<SampledBatches>(memory_token_source(tokens, "half-learnable"),
                                          c.model.vocab_size, c.model.seq_length, c.seed,
                                          c.valid_fraction);
}

std::vector<StepStats> run(Precision p, int64_t steps) {
  TrainConfig c = test::tiny_train_config(0, 1, 2, 0.0f, p);
  c.train_iters = steps;  // the lr schedule spans the run
  auto data = half_learnable_data(c);
  Trainer t(c, *data);
  std::vector<StepStats> out;
  for (int64_t s = 1; s <= steps; ++s) out.push_back(t.train_step(s));
  return out;
}

TEST(LowpTraining, Bf16IsDeterministicAndNotFp32) {
  const auto fp32 = run(Precision::Fp32, 3), a = run(Precision::Bf16, 3),
             b = run(Precision::Bf16, 3);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].loss, b[i].loss) << "step " << i + 1;
    EXPECT_EQ(a[i].grad_norm, b[i].grad_norm) << "step " << i + 1;
    EXPECT_EQ(a[i].precision, "bf16");
    EXPECT_GT(a[i].profile[Op::Cast], 0.0);
    EXPECT_GT(a[i].profile[Op::Gemm], 0.0);
    EXPECT_EQ(fp32[i].profile[Op::Cast], 0.0);  // fp32: nothing new runs
    EXPECT_EQ(fp32[i].precision, "fp32");
  }
  // Same initial weights; bf16 operands move the gradient well above float noise.
  EXPECT_GT(test::rel(a[0].grad_norm, fp32[0].grad_norm), 1e-5);
}

void expect_close_to_fp32(Precision p) {
  const auto fp32 = run(Precision::Fp32, 50), low = run(p, 50);
  // It learns: the loss falls as fp32's does.
  EXPECT_LT(low.back().loss, 0.9f * low.front().loss) << precision_name(p);
  EXPECT_LT(fp32.back().loss, 0.9f * fp32.front().loss);
  EXPECT_LE(test::rel(low.back().loss, fp32.back().loss), 0.02)
      << precision_name(p) << ": " << low.back().loss << " vs fp32 " << fp32.back().loss;
}

TEST(LowpTraining, Bf16LossWithinTwoPercentOfFp32After50Steps) {
  expect_close_to_fp32(Precision::Bf16);
}

TEST(LowpTraining, Fp16LossWithinTwoPercentOfFp32After50Steps) {
  expect_close_to_fp32(Precision::Fp16);
}

// The working copy follows the optimizer: evaluation after training in
// bf16 is close to the fp32 evaluation of the same (fp32 master) weights.
TEST(LowpTraining, EvaluationUsesTheRefreshedWorkingCopy) {
  TrainConfig c = test::tiny_train_config(0, 1, 2, 0.0f, Precision::Bf16);
  auto data = test::tiny_train_data(c);
  Trainer t(c, *data);
  const float before = t.evaluate();
  for (int64_t s = 1; s <= 20; ++s) t.train_step(s);
  const float after = t.evaluate();
  EXPECT_LT(after, before);
}

}  // namespace
}  // namespace tessera

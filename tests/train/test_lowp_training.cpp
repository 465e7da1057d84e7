// --bf16 / --fp16 in the trainer, one process: the GEMMs really run in the
// low precision (step 1 differs from fp32), the run is deterministic, it
// learns, and after 50 steps its loss is within 2 % of the fp32 run's. The
// step records its precision and charges the operand casts to "cast".
#include <gtest/gtest.h>

#include <cmath>
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

// fp16: initial_scale for the dynamic loss scaler (0: its default).
std::vector<StepStats> run(Precision p, int64_t steps, float initial_scale = 4096.0f) {
  TrainConfig c = test::tiny_train_config(0, 1, 2, 0.0f, p);
  c.train_iters = steps;  // the lr schedule spans the run
  if (p == Precision::Fp16) c.loss_scale.initial_scale = initial_scale;
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

// fp16 dynamic loss scaling: a scale far too large overflows the fp16
// operands (inf gradients); those steps are skipped (no update) and the
// scale comes down until steps are clean, then training goes on and learns.
TEST(LowpTraining, Fp16OverflowIsSkippedAndTheScaleComesDown) {
  const auto r = run(Precision::Fp16, 40, 4294967296.0f);  // 2^32
  EXPECT_TRUE(r[0].skipped);
  EXPECT_GE(r.back().skipped_steps, 1);
  EXPECT_LT(r.back().loss_scale, 4294967296.0f);
  EXPECT_FALSE(r.back().skipped);
  int64_t clean = 0;
  for (const auto& s : r) {
    EXPECT_TRUE(std::isfinite(s.loss));
    EXPECT_EQ(s.loss_scale > 0, true);
    clean += !s.skipped;
  }
  EXPECT_EQ(clean + r.back().skipped_steps, 40);
  EXPECT_GE(clean, 20);
  EXPECT_LT(r.back().loss, 0.95f * r.front().loss)  // 27 clean steps of 40: it learns
      << r.back().skipped_steps << " skipped, scale " << r.back().loss_scale << [&] {
           std::string l;
           for (const auto& s : r) l += " " + std::to_string(s.loss) + (s.skipped ? "s" : "");
           return l;
         }();
  // bf16 and fp32 have no scaler.
  EXPECT_EQ(run(Precision::Bf16, 1)[0].loss_scale, 0.0f);
}

}  // namespace
}  // namespace tessera

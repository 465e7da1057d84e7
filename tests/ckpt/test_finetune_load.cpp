// What `train --load` takes with Megatron's --finetune, --no-load-optim,
// --no-load-rng and --use-checkpoint-args (train/load_options.h), through
// the real trainer: a fine-tune is a fresh run whose init is the
// checkpoint's weights, bit for bit; fresh AdamW moments after
// --no-load-optim restart their bias correction; the refusals name the flag
// to pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ckpt_test_util.h"
#include "expect_error.h"
#include "hashed_batches.h"
#include "tessera/ckpt/checkpoint.h"
#include "tessera/config/config_json.h"
#include "tessera/train/load_options.h"
#include "tessera/train/trainer.h"

namespace tessera {
namespace {

using test::HashedBatches;

TrainConfig config() {
  TrainConfig c;
  c.model = test::tiny_gpt();
  c.model.attention_dropout = c.model.hidden_dropout = 0.1f;  // the RNG restarts too
  c.par.micro_batch = 2;
  c.par.global_batch = 4;
  c.train_iters = 6;
  c.optim.lr = 1e-2f;
  c.optim.warmup_iters = 2;
  c.seed = 5;
  c.peak_tflops = 1;
  c.progress = false;
  c.validate(1);
  return c;
}

// A run of `steps` steps saved under dir (its last step).
std::string trained_checkpoint(const TrainConfig& cfg, const BatchSource& data,
                               const std::string& dir, int64_t steps) {
  TrainConfig c = cfg;
  c.save_dir = dir;
  Trainer t(c, data);
  for (int64_t s = 1; s <= steps; ++s) t.train_step(s);
  return t.save(steps);
}

bool same(const Buffer& a, const Buffer& b) {
  return a.numel() == b.numel() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

TEST(FinetuneLoad, FinetuneIsAFreshRunFromTheCheckpointsWeights) {
  TrainConfig cfg = config();
  HashedBatches data(cfg.model.vocab_size);
  test::ScratchDir dir("ckpt_finetune");
  trained_checkpoint(cfg, data, dir.str(), 3);
  const ckpt::Checkpoint ck = ckpt::open_checkpoint(dir.str());
  ASSERT_TRUE(ck.has_optimizer_state);

  // Reference: a fresh trainer, its weights replaced by the checkpoint's,
  // its optimizer, step and seed its own.
  TrainConfig other = cfg;
  other.seed = 77;  // a fine-tune's data order and dropout follow its own --seed
  Trainer ref(other, data);
  ckpt::load_into(ck, ref.model(), nullptr);
  TrainConfig ft = other;
  ft.load_dir = dir.str();
  ft.finetune = true;
  Trainer tuned(ft, data);
  EXPECT_EQ(tuned.load(dir.str()), 0) << "--finetune starts at step 1";
  std::vector<float> ref_losses, tuned_losses;
  for (int64_t s = 1; s <= 3; ++s) {
    ref_losses.push_back(ref.train_step(s).loss);
    tuned_losses.push_back(tuned.train_step(s).loss);
  }
  EXPECT_EQ(ref_losses, tuned_losses);
  EXPECT_TRUE(same(ref.model().params(), tuned.model().params()));
  EXPECT_TRUE(same(ref.optimizer().exp_avg(), tuned.optimizer().exp_avg()))
      << "--finetune loaded the checkpoint's moments";

  // A plain resume would not be the same run: the moments and step differ.
  TrainConfig res = cfg;
  res.load_dir = dir.str();
  Trainer resumed(res, data);
  EXPECT_EQ(resumed.load(dir.str()), 3);
  EXPECT_FALSE(same(ref.optimizer().exp_avg(), resumed.optimizer().exp_avg()));
}

TEST(FinetuneLoad, NoLoadOptimKeepsTheStepAndRestartsBiasCorrection) {
  TrainConfig cfg = config();
  cfg.optim.min_lr = cfg.optim.lr;  // a flat LR after warm-up: lr(4) = lr
  cfg.optim.weight_decay = 0;
  cfg.optim.clip_grad = 0;
  HashedBatches data(cfg.model.vocab_size);
  test::ScratchDir dir("ckpt_no_load_optim");
  trained_checkpoint(cfg, data, dir.str(), 3);

  TrainConfig c = cfg;
  c.load_dir = dir.str();
  c.no_load_optim = true;
  Trainer t(c, data);
  EXPECT_EQ(t.load(dir.str()), 3) << "--no-load-optim keeps the step";
  const Buffer& p = t.model().params();
  std::vector<float> before(p.f32(), p.f32() + p.numel());
  t.train_step(4);
  // Fresh moments at their first step: m^ = g, v^ = g^2, so each weight with
  // a gradient moves by lr * |g| / (|g| + eps) = lr. Counting the bias
  // correction from step 4 instead would move it by about 0.58 lr.
  int64_t moved = 0, at_lr = 0;
  for (int64_t i = 0; i < p.numel(); ++i) {
    const double d = std::fabs(double(p.f32()[i]) - double(before[size_t(i)]));
    if (d == 0) continue;
    ++moved;
    if (std::fabs(d / cfg.optim.lr - 1.0) < 1e-2) ++at_lr;
  }
  ASSERT_GT(moved, p.numel() / 2);
  EXPECT_GT(double(at_lr), 0.95 * double(moved)) << at_lr << " of " << moved << " moved by lr";
}

TEST(FinetuneLoad, RefusalsNameTheFlagToPass) {
  TrainConfig cfg = config();
  HashedBatches data(cfg.model.vocab_size);
  test::ScratchDir dir("ckpt_load_refusals");
  trained_checkpoint(cfg, data, dir.str(), 2);
  ckpt::Checkpoint ck = ckpt::open_checkpoint(dir.str());
  TrainConfig c = cfg;
  c.load_dir = dir.str();

  c.seed = 6;
  EXPECT_TRUE(test::throws_error_with([&] { check_load_options(c, ck); },
                                      {"trained with --seed 5, this run has --seed 6"}));
  EXPECT_TRUE(test::throws_error_with([&] { check_load_options(c, ck); }, {"pass --no-load-rng"}));
  c.no_load_rng = true;
  check_load_options(c, ck);
  c.no_load_rng = false;
  c.finetune = true;  // --finetune takes no seed either
  check_load_options(c, ck);
  c.finetune = false;
  c.seed = 5;

  // An import: no optimizer state, no seed.
  ck.has_optimizer_state = false;
  ck.state.has_seed = false;
  ck.state.extra["imported_from"] = "x/model.safetensors";
  EXPECT_TRUE(test::throws_error_with([&] { check_load_options(c, ck); },
                                      {"has no optimizer state to resume (it is an import): "
                                       "pass --finetune"}));
  c.no_load_optim = true;
  c.seed = 6;  // nothing recorded to disagree with
  check_load_options(c, ck);

  c.model.num_layers += 1;
  EXPECT_TRUE(
      test::throws_error_with([&] { check_load_options(c, ck); }, {"pass --use-checkpoint-args"}));
}

TEST(FinetuneLoad, CheckpointArgsOverrideAndSaySo) {
  TrainConfig cfg = config();
  HashedBatches data(cfg.model.vocab_size);
  test::ScratchDir dir("ckpt_checkpoint_args");
  trained_checkpoint(cfg, data, dir.str(), 1);
  const ckpt::Checkpoint ck = ckpt::open_checkpoint(dir.str());
  TrainConfig c;  // the library's default shape, nothing like the tiny model
  c.model.num_layers = cfg.model.num_layers + 3;
  const auto notes = apply_checkpoint_args(c, ck, {"--num-layers"});
  EXPECT_EQ(model_difference(c.model, cfg.model), "");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], fmt::format("--use-checkpoint-args: --num-layers {} replaced by the "
                                  "checkpoint's {}",
                                  cfg.model.num_layers + 3, cfg.model.num_layers));
}

}  // namespace
}  // namespace tessera

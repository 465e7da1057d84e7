// Bit-exact resume through the real trainer: 20 steps equal 10 steps, a
// checkpoint, a fresh process-like restart that loads it, and 10 more —
// with the state the trainer is expected to save (TrainState) and nothing else.
#include <gtest/gtest.h>

#include <cstring>

#include "ckpt_test_util.h"
#include "hashed_batches.h"
#include "tessera/ckpt/checkpoint.h"
#include "tessera/train/trainer.h"

namespace tessera {
namespace {

using test::HashedBatches;

TrainConfig config() {
  TrainConfig c;
  c.model = test::tiny_gpt();
  c.par.micro_batch = 2;
  c.par.global_batch = 4;
  c.train_iters = 20;
  c.optim.lr = 1e-2f;
  c.optim.warmup_iters = 3;
  c.seed = 5;
  c.peak_tflops = 1;
  c.progress = false;
  c.validate(1);
  return c;
}

TEST(Resume, TwentyStepsEqualTenSaveLoadTen) {
  TrainConfig cfg = config();
  HashedBatches data(cfg.model.vocab_size);
  test::ScratchDir dir("ckpt_resume");

  Trainer straight(cfg, data);
  for (int64_t s = 1; s <= 20; ++s) straight.train_step(s);

  {
    Trainer first(cfg, data);
    for (int64_t s = 1; s <= 10; ++s) first.train_step(s);
    ckpt::TrainState st;
    st.step = 10;
    st.consumed_samples = 10 * cfg.par.global_batch;
    st.seed = cfg.seed;
    ckpt::save_checkpoint(dir.str(), ckpt::whole_rank(first.model(), &first.optimizer()), st,
                          ckpt::RunInfo{cfg.model, cfg.par, "bytes"}, {2, nullptr});
  }
  // A different seed: everything that matters must come from the checkpoint.
  TrainConfig cfg2 = cfg;
  cfg2.seed = 999;
  Trainer resumed(cfg2, data);
  ckpt::Checkpoint ck = ckpt::open_checkpoint(dir.str());
  ckpt::load_into(ck, resumed.model(), &resumed.optimizer());
  for (int64_t s = ck.state.step + 1; s <= 20; ++s) resumed.train_step(s);

  const Buffer& a = straight.model().params();
  const Buffer& b = resumed.model().params();
  ASSERT_EQ(a.numel(), b.numel());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0) << "params differ after resume";
  EXPECT_EQ(std::memcmp(straight.optimizer().exp_avg().data(), resumed.optimizer().exp_avg().data(),
                        a.nbytes()),
            0);
  EXPECT_EQ(std::memcmp(straight.optimizer().exp_avg_sq().data(),
                        resumed.optimizer().exp_avg_sq().data(), a.nbytes()),
            0);
}

}  // namespace
}  // namespace tessera

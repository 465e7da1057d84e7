// Resuming through the trainer (train --load: Trainer::load ->
// load_zero_shard) refuses a checkpoint of a different model, naming the
// first difference — including differences the tensor shapes cannot show
// (the head count) or hide (a larger vocabulary inside the same padding) —
// and still allows what does not change the model (padding, micro-batch).
#include <gtest/gtest.h>

#include "ckpt_test_util.h"
#include "tessera/ckpt/checkpoint.h"
#include "tessera/core/error.h"
#include "tessera/train/trainer.h"

namespace tessera {
namespace {

class ZeroBatches : public BatchSource {
 public:
  explicit ZeroBatches(int64_t vocab) : vocab_(vocab) {}
  void fill(Split, int64_t, int64_t count, int64_t T, int32_t* out) const override {
    for (int64_t i = 0; i < count * (T + 1); ++i) out[i] = int32_t(i % vocab_);
  }
  int64_t vocab_size() const override { return vocab_; }
  std::string describe() const override { return "counting"; }

 private:
  int64_t vocab_;
};

TrainConfig config() {
  TrainConfig c;
  c.model = test::tiny_gpt();
  c.par.micro_batch = 2;
  c.par.global_batch = 4;
  c.train_iters = 4;
  c.seed = 5;
  c.peak_tflops = 1;
  c.progress = false;
  c.validate(1);
  return c;
}

// A checkpoint of config() at step 2 under dir.
void save_tiny(const std::string& dir) {
  TrainConfig cfg = config();
  ZeroBatches data(cfg.model.vocab_size);
  Trainer t(cfg, data);
  t.train_step(1);
  t.train_step(2);
  ckpt::TrainState st;
  st.step = 2;
  st.seed = cfg.seed;
  ckpt::save_checkpoint(dir, ckpt::whole_rank(t.model(), &t.optimizer()), st,
                        ckpt::RunInfo{cfg.model, cfg.par, "bytes"});
}

std::string load_error(const std::string& dir, const TrainConfig& cfg) {
  ZeroBatches data(cfg.model.vocab_size);
  Trainer t(cfg, data);
  try {
    t.load(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ResumeModelCheck, OtherHeadCountIsRefusedThoughTheShapesAgree) {
  test::ScratchDir dir("resume_heads");
  save_tiny(dir.str());
  TrainConfig cfg = config();
  cfg.model.num_heads = 2;  // hidden 32: every tensor keeps its shape
  cfg.validate(1);
  EXPECT_NE(load_error(dir.str(), cfg).find("num_heads 4 vs 2"), std::string::npos)
      << load_error(dir.str(), cfg);
}

TEST(ResumeModelCheck, LargerVocabularyInsideThePaddingIsRefused) {
  test::ScratchDir dir("resume_vocab");
  save_tiny(dir.str());
  TrainConfig cfg = config();
  cfg.model.vocab_size = 100;  // 67 and 100 both pad to 128 rows
  cfg.validate(1);
  const std::string err = load_error(dir.str(), cfg);
  EXPECT_NE(err.find("vocab_size 67 vs 100"), std::string::npos) << err;
}

TEST(ResumeModelCheck, FewerLayersAreRefused) {
  test::ScratchDir dir("resume_layers");
  save_tiny(dir.str());
  TrainConfig cfg = config();
  cfg.model.num_layers = 1;
  cfg.validate(1);
  const std::string err = load_error(dir.str(), cfg);
  EXPECT_NE(err.find("num_layers 2 vs 1"), std::string::npos) << err;
}

TEST(ResumeModelCheck, PaddingAndMicroBatchChangesStillResume) {
  test::ScratchDir dir("resume_padding");
  save_tiny(dir.str());
  TrainConfig cfg = config();
  cfg.model.make_vocab_size_divisible_by = 64;  // 67 -> 128 rows either way, other multiple
  cfg.par.micro_batch = 1;
  cfg.validate(1);
  EXPECT_EQ(load_error(dir.str(), cfg), "");
}

}  // namespace
}  // namespace tessera

// Training the engine on real English text (the fortunes corpus, as bytes)
// must learn more than byte frequencies: the validation loss has to end
// clearly below the unigram entropy of the text, which is the best loss any
// model that ignores context can reach. It must also start at ln(256), the
// loss of a uniform guess, which checks the initialisation.
#include <gtest/gtest.h>

#include <cmath>

#include "tessera/data/fortunes_corpus.h"
#include "tessera/train/sampled_batches.h"
#include "tessera/train/trainer.h"

namespace tessera {
namespace {

double unigram_entropy_nats(const std::vector<int32_t>& tokens) {
  std::vector<double> count(256, 0.0);
  for (int32_t t : tokens) count[size_t(t)] += 1;
  double h = 0;
  for (double c : count)
    if (c > 0) {
      double p = c / double(tokens.size());
      h -= p * std::log(p);
    }
  return h;
}

TEST(TrainingLearns, FortunesLossFallsWellBelowUnigramEntropy) {
  TrainConfig cfg;
  cfg.model.num_layers = 2;
  cfg.model.hidden_size = 128;
  cfg.model.num_heads = 4;
  cfg.model.seq_length = 64;
  cfg.model.vocab_size = 256;
  cfg.par.micro_batch = 16;
  cfg.par.global_batch = 16;
  cfg.train_iters = 300;
  cfg.optim.lr = 3e-3f;
  cfg.optim.min_lr = 3e-4f;
  cfg.optim.warmup_iters = 20;
  cfg.eval_iters = 8;
  cfg.valid_fraction = 0.02;
  cfg.peak_tflops = 1;
  cfg.validate(1);

  std::vector<int32_t> tokens = bytes_to_tokens(read_fortunes());
  const double h1 = unigram_entropy_nats(tokens);
  SampledBatches data(memory_token_source(tokens, "fortunes bytes"), 256, cfg.model.seq_length,
                      cfg.seed, cfg.valid_fraction);
  Trainer trainer(cfg, data);

  const float initial = trainer.evaluate();
  EXPECT_NEAR(initial, std::log(256.0), 0.05);
  float first_train = 0;
  for (int64_t s = 1; s <= cfg.train_iters; ++s) {
    StepStats st = trainer.train_step(s);
    if (s == 1) first_train = st.loss;
  }
  const float final_valid = trainer.evaluate();
  RecordProperty("unigram_entropy", std::to_string(h1));
  RecordProperty("final_valid_loss", std::to_string(final_valid));
  std::printf("unigram entropy %.3f nats, first train loss %.3f, validation loss %.3f -> %.3f\n",
              h1, first_train, initial, final_valid);
  // The fortunes bytes have a unigram entropy of about 3.3 nats. A model
  // that uses context gets well below it (this run reaches about 2.85);
  // 0.3 nats below means the model's next-byte distribution is 1.35x
  // sharper (in perplexity) than byte frequencies alone allow.
  EXPECT_GT(h1, 2.8);
  EXPECT_LT(final_valid, h1 - 0.3);
}

}  // namespace
}  // namespace tessera

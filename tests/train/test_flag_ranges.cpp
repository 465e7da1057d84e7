// Issue 15, defects 5 and 6: every numeric setting's range is checked in one
// place (GPTConfig, ParallelConfig, TrainConfig::validate, the planner's
// search space), products of sizes cannot wrap, JSON fields of the wrong
// type name the field, and a run that cannot fit memory is refused with the
// bytes it needs before anything is allocated.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "expect_error.h"
#include "tessera/config/config_json.h"
#include "tessera/ckpt/hf_gpt2.h"
#include "tessera/plan/search.h"
#include "tessera/plan/system.h"
#include "tessera/train/memory_check.h"
#include "tessera/train/train_config.h"
#include "tiny_model.h"

namespace tessera {
namespace {

using test::throws_error_with;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kHalf = int64_t(1) << 62;  // times 4 wraps to 0

TrainConfig small_run() {
  TrainConfig c;
  c.model.num_layers = 2;
  c.model.hidden_size = 32;
  c.model.num_heads = 2;
  c.model.seq_length = 16;
  c.model.vocab_size = 64;
  c.par.micro_batch = 2;
  c.par.global_batch = 4;
  return c;
}

TEST(FlagRanges, TheSmallRunIsValid) { EXPECT_NO_THROW(small_run().validate(1)); }

TEST(FlagRanges, ParallelProductsThatWrapAreRefusedNamingTheFlags) {
  TrainConfig c = small_run();
  c.par.tp = kHalf;
  c.par.pp = 4;  // tp x pp = 2^64: wrapped to 0, then world % 0 was SIGFPE
  EXPECT_TRUE(throws_error_with([&] { c.par.set_world(8); },
                                {"--tensor-model-parallel-size x --context-parallel-size x "
                                 "--pipeline-model-parallel-size",
                                 "overflows"}));
  c = small_run();
  c.par.micro_batch = kHalf;
  c.par.dp = 4;
  c.par.tp = 1;
  EXPECT_TRUE(throws_error_with([&] { c.par.validate(c.model, 4); },
                                {"--micro-batch-size x data-parallel size", "overflows"}));
  c = small_run();
  c.model.make_vocab_size_divisible_by = kMax;
  EXPECT_TRUE(throws_error_with([&] { c.validate(1); }, {"overflows"}));
}

TEST(FlagRanges, ZeroDegreesAreRefusedBeforeAnyDivision) {
  for (auto set : {+[](TrainConfig& c) { c.par.tp = 0; }, +[](TrainConfig& c) { c.par.pp = 0; },
                   +[](TrainConfig& c) { c.par.micro_batch = 0; }}) {
    TrainConfig c = small_run();
    set(c);
    EXPECT_TRUE(throws_error_with([&] { c.validate(1); }, {"must be >= 1"}));
  }
}

TEST(FlagRanges, ModelSizesThatWrapAreRefused) {
  for (auto set : {+[](GPTConfig& m) { m.hidden_size = kHalf; },
                   +[](GPTConfig& m) { m.ffn_hidden_size = kHalf; },
                   +[](GPTConfig& m) { m.max_position_embeddings = kHalf; },
                   +[](GPTConfig& m) { m.vocab_size = (int64_t(1) << 31) - 1, m.hidden_size = kHalf / 2; }}) {
    GPTConfig m = small_run().model;
    set(m);
    EXPECT_TRUE(throws_error_with([&] { m.validate(); }, {"model size", "overflows"}));
  }
  GPTConfig m = small_run().model;
  m.num_layers = 100000000;  // the layout would list every layer before any byte check
  EXPECT_TRUE(throws_error_with([&] { m.validate(); }, {"--num-layers must be in [1, 65536]"}));
}

TEST(FlagRanges, FloatFlagsMustBeFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    void (*set)(TrainConfig&, float);
    const char* flag;
  };
  const Case cases[] = {
      {[](TrainConfig& c, float v) { c.optim.lr = v; }, "--lr"},
      {[](TrainConfig& c, float v) { c.optim.eps = v; }, "--adam-eps"},
      {[](TrainConfig& c, float v) { c.optim.weight_decay = v; }, "--weight-decay"},
      {[](TrainConfig& c, float v) { c.optim.clip_grad = v; }, "--clip-grad"},
      {[](TrainConfig& c, float v) { c.peak_tflops = v; }, "--peak-tflops"},
      {[](TrainConfig& c, float v) { c.model.init_std = v; }, "--init-method-std"},
  };
  for (const Case& k : cases)
    for (float v : {inf, nan}) {
      TrainConfig c = small_run();
      k.set(c, v);
      EXPECT_TRUE(throws_error_with([&] { c.validate(1); }, {k.flag, "finite"})) << k.flag << " " << v;
    }
}

TEST(FlagRanges, ThreadsAndTokenCountsAreBounded) {
  TrainConfig c = small_run();
  c.threads = 100000;  // libgomp crashed creating them
  EXPECT_TRUE(throws_error_with([&] { c.validate(1); }, {"--threads must be in [0, 1024]"}));
  c = small_run();
  c.train_iters = kMax;
  EXPECT_TRUE(throws_error_with([&] { c.validate(1); }, {"--train-iters x", "overflows"}));
  c = small_run();
  c.eval_iters = kHalf;
  EXPECT_TRUE(throws_error_with([&] { c.validate(1); }, {"--eval-iters", "overflows"}));
}

TEST(MemoryCheck, ARunThatCannotFitIsRefusedWithTheBytesItNeeds) {
  TrainConfig c = small_run();
  const MemoryBytes need = rank_memory_lower_bound(c, 0, 0);
  // fp32 weights, gradients and Adam's two moments: 4 + 4 + 8 bytes each.
  EXPECT_EQ(need.grads, need.params);
  EXPECT_EQ(need.optimizer, 2 * need.params);
  EXPECT_GT(need.activations, 0);
  EXPECT_NO_THROW(check_memory_fits(need, need.total(), 1));
  EXPECT_NO_THROW(check_memory_fits(need, 0, 1));  // unknown: no check
  EXPECT_TRUE(throws_error_with([&] { check_memory_fits(need, need.total() * 1.5, 2); },
                                {"needs at least", "GB per rank", "to each of the 2 ranks"}));
  // A 10^6-wide layer: 12 x 10^12 parameters, 192 TB of model state.
  c.model.hidden_size = 1000000;
  c.model.num_layers = 1;
  const MemoryBytes huge = rank_memory_lower_bound(c, 0, 0);
  EXPECT_GT(huge.state(), 1.9e14);
  EXPECT_TRUE(throws_error_with([&] { check_memory_fits(huge, 64e9, 1); },
                                {"needs at least 19", "64.0 GB are available"}));
  // ZeRO-3 over 4 replicas: each rank holds a quarter of every kind.
  c = small_run();
  c.par.zero_stage = 3;
  c.par.dp = 4;
  c.par.global_batch = 8;
  const MemoryBytes sharded = rank_memory_lower_bound(c, 0, 0);
  EXPECT_NEAR(sharded.params * 4, need.params, 64 * 16);  // units padded to 16 x dp
}

TEST(JsonFields, AWrongTypedFieldNamesItInsteadOfATypeError) {
  nlohmann::json model = model_to_json(small_run().model);
  nlohmann::json bad = model;
  bad["ffn_hidden_size"] = "x";
  EXPECT_TRUE(throws_error_with([&] { model_from_json(bad); },
                                {"model config", "'ffn_hidden_size' must be an integer"}));
  bad = model;
  bad["init_std"] = "x";
  EXPECT_TRUE(throws_error_with([&] { model_from_json(bad); }, {"'init_std' must be a number"}));
  EXPECT_TRUE(throws_error_with([&] { model_from_json(nlohmann::json::array()); },
                                {"model config is not an object"}));
  nlohmann::json par = parallel_to_json(small_run().par);
  for (const char* key : {"tp", "schedule", "sequence_parallel", "zero_stage"}) {
    nlohmann::json p = par;
    p[key] = key == std::string("schedule") ? nlohmann::json(5) : nlohmann::json("x");
    EXPECT_TRUE(throws_error_with([&] { parallel_from_json(p); }, {"parallel config", key}))
        << key;
  }
  EXPECT_TRUE(throws_error_with([&] { parallel_from_json(7); },
                                {"parallel config is not an object"}));
  nlohmann::json hf = ckpt::hf_config(test::gpt2_small());
  for (const char* key : {"activation_function", "layer_norm_epsilon", "tie_word_embeddings",
                          "initializer_range", "n_inner"}) {
    nlohmann::json h = hf;
    h[key] = key == std::string("activation_function") ? nlohmann::json(5) : nlohmann::json("x");
    EXPECT_TRUE(throws_error_with([&] { ckpt::model_from_hf_config(h); }, {"config.json", key}))
        << key;
  }
}

TEST(PlanSearchSpace, ZeroDegreesAndHugeCountsAreRefusedNamingTheFlag) {
  const GPTConfig m = test::gpt2_small();
  const plan::SystemSpec sys = plan::load_system("frontier");
  auto space = [] {
    plan::SearchSpace s;
    s.devices = 8;
    s.global_batch = 8;
    return s;
  };
  plan::SearchSpace s = space();
  s.tp = {0};  // N % 0 was SIGFPE
  EXPECT_TRUE(throws_error_with([&] { plan::enumerate_layouts(m, sys, s); }, {"--tp must be >= 1"}));
  s = space();
  s.pp = {0};
  EXPECT_TRUE(throws_error_with([&] { plan::enumerate_layouts(m, sys, s); }, {"--pp must be >= 1"}));
  s = space();
  s.micro_batch = {0};
  EXPECT_TRUE(throws_error_with([&] { plan::enumerate_layouts(m, sys, s); },
                                {"--micro-batch must be >= 1"}));
  s = space();
  s.devices = kMax;  // divisors by trial division up to 2^63: a hang
  EXPECT_TRUE(throws_error_with([&] { plan::enumerate_layouts(m, sys, s); }, {"--devices must be in"}));
  s = space();
  s.global_batch = kMax;
  EXPECT_TRUE(throws_error_with([&] { plan::enumerate_layouts(m, sys, s); },
                                {"--global-batch-size must be in"}));
  // The bound itself still searches, and quickly (divisors in O(sqrt n)).
  s = space();
  s.devices = int64_t(1) << 24;
  s.global_batch = int64_t(1) << 24;
  s.zero_stages = {1};
  s.recompute = {Recompute::Full};
  s.sequence_parallel = {false};
  s.schedules = {ScheduleKind::OneFOneB};
  s.micro_batch = {1};
  EXPECT_FALSE(plan::enumerate_layouts(m, sys, s).empty());
}

}  // namespace
}  // namespace tessera

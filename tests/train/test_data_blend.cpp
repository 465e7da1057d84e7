// The data layouts Megatron-LM users expect (issue 16, item 7): weighted
// blends (`--data-path 0.7 a 0.3 b`), `--split 969,30,1`, a separate
// `--valid-data-path`, and GPT-2's vocabulary as the default for llm.c
// GPT-2 shards.
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

#include <fmt/core.h>

#include "expect_error.h"
#include "tessera/data/data_blend.h"
#include "tessera/data/llmc_shard.h"
#include "tessera/data/token_file.h"
#include "tessera/train/blended_batches.h"
#include "tessera/train/data_setup.h"
#include "tessera/train/sampled_batches.h"

namespace tessera {
namespace {

using test::throws_error_with;
namespace fs = std::filesystem;

constexpr int64_t kT = 4;

// tokens[i] = base + i (ids stay < 1000): a window's first id tells where it was read.
std::unique_ptr<SampledBatches> ramp(int32_t base, int n, double valid = 0, double test = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));  // (n,)
  std::iota(t.begin(), t.end(), base);
  return std::make_unique<SampledBatches>(memory_token_source(t, fmt::format("ramp{}", base)),
                                          1000, kT, 7, valid, test);
}

std::vector<int32_t> windows(const BatchSource& b, Split split, int64_t first, int64_t count) {
  std::vector<int32_t> out(size_t(count * (kT + 1)));  // (count, T + 1)
  b.fill(split, first, count, kT, out.data());
  return out;
}

TEST(DataBlend, ParsesPathsAndWeightedBlends) {
  auto plain = data::parse_data_blend({"a.bin", "b.bin"}, "--data-path");
  EXPECT_FALSE(plain.weighted());
  EXPECT_EQ(plain.paths, (std::vector<std::string>{"a.bin", "b.bin"}));
  auto blend = data::parse_data_blend({"0.7", "a", "0.7", "b", "0.6", "c"}, "--data-path");
  ASSERT_TRUE(blend.weighted());
  EXPECT_EQ(blend.paths, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_DOUBLE_EQ(blend.weights[0], 0.35);
  EXPECT_DOUBLE_EQ(blend.weights[2], 0.3);
  for (auto words : std::vector<std::vector<std::string>>{
           {"0.7", "a", "0.3"}, {"-1", "a"}, {"0", "a"}, {"inf", "a"}, {"0.5", "0.5"}, {"a", "0.5"}})
    EXPECT_TRUE(throws_error_with([&] { data::parse_data_blend(words, "--data-path"); },
                                  {"--data-path"}));
}

TEST(DataBlend, ParsesMegatronSplits) {
  auto f = data::parse_split("969,30,1");
  EXPECT_DOUBLE_EQ(f.train, 0.969);
  EXPECT_DOUBLE_EQ(f.valid, 0.03);
  EXPECT_DOUBLE_EQ(f.test, 0.001);
  f = data::parse_split("98/2");
  EXPECT_DOUBLE_EQ(f.valid, 0.02);
  EXPECT_DOUBLE_EQ(f.test, 0);
  EXPECT_DOUBLE_EQ(data::parse_split("100").train, 1);
  for (const char* bad : {"a,b", "0,1", "1,2,3,4", "-1,2", "", "1,,2"})
    EXPECT_TRUE(throws_error_with([&] { data::parse_split(bad); }, {"--split"})) << bad;
}

// Each part gives its share to within one sample at every point, and its
// samples in its own order; the sequence does not depend on how it is asked.
TEST(DataBlend, BlendGivesEachPartItsShareInItsOwnOrder) {
  std::vector<std::unique_ptr<BatchSource>> parts;
  parts.push_back(ramp(0, 400));
  parts.push_back(ramp(500, 400));
  BlendedBatches blend(std::move(parts), {0.7, 0.3});
  auto part0 = ramp(0, 400), part1 = ramp(500, 400);
  int64_t given[2] = {0, 0};
  for (int64_t i = 0; i < 1000; ++i) {
    const auto [d, j] = blend.pick(Split::Train, i);
    EXPECT_EQ(j, given[d]++);
    const double share = d == 0 ? 0.7 : 0.3;
    ASSERT_LE(std::abs(double(given[d]) - share * double(i + 1)), 1.0) << "sample " << i;
    if (i < 50)
      EXPECT_EQ(windows(blend, Split::Train, i, 1), windows(d == 0 ? *part0 : *part1, Split::Train, j, 1));
  }
  EXPECT_EQ(given[0], 700);
  std::vector<std::unique_ptr<BatchSource>> again;
  again.push_back(ramp(0, 400));
  again.push_back(ramp(500, 400));
  BlendedBatches other(std::move(again), {0.7, 0.3});
  auto later = windows(other, Split::Train, 37, 5);  // asked out of order, in another chunking
  auto whole = windows(blend, Split::Train, 30, 20);
  EXPECT_EQ(later, std::vector<int32_t>(whole.begin() + 7 * (kT + 1), whole.begin() + 12 * (kT + 1)));
}

TEST(DataBlend, SplitHoldsOutATestPartNeverTrainedOn) {
  auto b = ramp(0, 1000, 0.1, 0.2);  // train [0, 700), valid [700, 800), test [800, 1000)
  EXPECT_NE(b->describe().find("200 test (held out)"), std::string::npos) << b->describe();
  for (int64_t s = 0; s < 2 * b->windows(Split::Train); ++s)
    EXPECT_LT(windows(*b, Split::Train, s, 1).back(), 700);
  for (int64_t s = 0; s < b->windows(Split::Valid); ++s) {
    auto w = windows(*b, Split::Valid, s, 1);
    EXPECT_GE(w.front(), 700);
    EXPECT_LT(w.back(), 800);
  }
}

TEST(DataBlend, ValidationFromItsOwnSource) {
  TrainValidBatches b(ramp(0, 100), ramp(500, 40));
  EXPECT_LT(windows(b, Split::Train, 3, 1).front(), 100);
  EXPECT_EQ(windows(b, Split::Valid, 0, 2),
            (std::vector<int32_t>{500, 501, 502, 503, 504, 504, 505, 506, 507, 508}));
}

TEST(DataBlend, OpenTrainingDataBuildsBlendsAndValidationSets) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("tessera_blend_{}", getpid());
  fs::create_directories(dir);
  auto write_tok = [&](const std::string& name, int32_t base) {
    data::TokenFileWriter w((dir / name).string(), 1000, 0);
    std::vector<int32_t> t(300);  // (300,)
    std::iota(t.begin(), t.end(), base);
    w.append(t);
    w.close();
    return (dir / name).string();
  };
  const std::string a = write_tok("a.tok", 0), b = write_tok("b.tok", 500),
                    v = write_tok("v.tok", 100);
  TrainConfig cfg;
  cfg.model.seq_length = kT;
  cfg.data_paths = {"3", a, "1", b};
  TrainingData d = open_training_data(cfg, 0);
  EXPECT_EQ(d.vocab_size, 1000);
  EXPECT_EQ(d.batches->describe().rfind("blend of 2: 0.750 x [", 0), 0u) << d.batches->describe();
  cfg.valid_data_paths = {v};
  d = open_training_data(cfg, 0);
  std::vector<int32_t> w(kT + 1);  // (T + 1,)
  d.batches->fill(Split::Valid, 0, 1, kT, w.data());
  EXPECT_EQ(w, (std::vector<int32_t>{100, 101, 102, 103, 104}));
  cfg.data_paths = {"1", a, "x", b};
  EXPECT_TRUE(throws_error_with([&] { open_training_data(cfg, 0); }, {"--data-path", "'x'"}));
  fs::remove_all(dir);
}

TEST(DataBlend, LlmcShardsDefaultToTheirTokenizersVocabulary) {
  const fs::path p = fs::temp_directory_path() / fmt::format("tessera_llmc_{}.bin", getpid());
  data::write_llmc_shard(p.string(), {1, 2, 3});
  EXPECT_EQ(data::open_token_source(p.string())->vocab_hint(), 50257u);
  fs::remove(p);
}

}  // namespace
}  // namespace tessera

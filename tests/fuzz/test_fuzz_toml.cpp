// Fuzzing the TOML files a user names (issue 38): system files (`plan
// --system`), model files (`plan --model`), and keys of many parts and deep
// or huge values through every TOML reader (system, model, `--config`). A
// file a reader accepts is then planned (fuzz_targets.h: plan_one_device),
// and must plan to finite numbers. CI runs a few hundred cases per target;
// the >= 10,000-case runs are by hand (docs/reliability.md):
//   TESSERA_FUZZ_CASES=10000 build/tests/test_fuzz_toml
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_scratch.h"
#include "fuzz_targets.h"
#include "fuzz_toml.h"

namespace tessera::fuzz {
namespace {

constexpr int64_t kCiCases = 500;  // per target: 2,000 in all

fs::path configs() { return fs::path(TESSERA_SOURCE_DIR) / "configs"; }

// Every shipped file of a kind, whole and without its comment lines.
std::vector<Bytes> shipped(const char* kind) {
  std::vector<Bytes> seeds;
  for (const auto& e : fs::directory_iterator(configs() / kind))
    if (e.path().extension() == ".toml") {
      seeds.push_back(get_file(e.path()));
      seeds.push_back(without_comment_lines(seeds.back()));
    }
  return seeds;
}

std::vector<Bytes> model_seeds() {
  std::vector<Bytes> seeds = shipped("models");
  // The older spelling ([model], snake_case) and a Llama-family file with
  // every family key and a train key that is not the model's.
  seeds.push_back("[model]\nnum_layers = 3\nhidden_size = 96\nnum_heads = 4\nseq_length = 64\n");
  seeds.push_back(
      "num-layers = 2\nhidden-size = 128\nnum-attention-heads = 8\nseq-length = 64\n"
      "vocab-size = 1000\nnormalization = \"RMSNorm\"\nnorm-epsilon = 1e-5\nswiglu = true\n"
      "position-embedding-type = \"rope\"\nrotary-base = 500000\ngroup-query-attention = true\n"
      "num-query-groups = 2\nuntie-embeddings-and-output-weights = true\nlr = 3e-4\n");
  return seeds;
}

// The dotted-key and deep-value cases go to each TOML reader in turn: the
// first byte of a case picks the reader (any byte does), the rest is the file.
struct EveryReader {
  ScratchDir scratch{"fuzz_toml_readers"};
  plan::SystemSpec sys = plan::load_system_file((configs() / "systems" / "h100.toml").string());

  std::vector<Bytes> seeds() const {
    const Bytes system = without_comment_lines(get_file(configs() / "systems" / "h100.toml"));
    const Bytes model = get_file(configs() / "models" / "default-small.toml");
    const Bytes config = "num-layers = 4\nlr = 3e-4\nsave = \"ck\"\n[table]\nx = 1\n";
    return {Bytes(1, '\0') + system, Bytes(1, '\1') + model, Bytes(1, '\2') + config};
  }
  void run(const Bytes& in) {
    const Bytes text = in.empty() ? Bytes() : in.substr(1);
    switch (in.empty() ? 0 : uint8_t(in[0]) % 3) {
      case 0: run_system_file(scratch.path, text); break;
      case 1: run_model_file(scratch.path, text, sys); break;
      default: run_config(scratch.path, text); break;
    }
  }
  // The reader's byte kept, the file changed by `change`.
  static Mutator keep_reader(Bytes (*change)(const Bytes&, Rand&)) {
    return [change](const Bytes& in, Rand& r) { return in.substr(0, 1) + change(in.substr(1), r); };
  }
};

TEST(Fuzz, SystemToml) {
  ScratchDir s("fuzz_system");
  expect_clean(run_cases("system-toml", 10, shipped("systems"), case_count(kCiCases), 0,
                         [&](const Bytes& in) { run_system_file(s.path, in); }, mutate_toml_text));
}

TEST(Fuzz, ModelToml) {
  ScratchDir s("fuzz_model");
  const plan::SystemSpec sys = plan::load_system_file((configs() / "systems" / "h100.toml").string());
  expect_clean(run_cases("model-toml", 11, model_seeds(), case_count(kCiCases), 0,
                         [&](const Bytes& in) { run_model_file(s.path, in, sys); },
                         mutate_toml_text));
}

TEST(Fuzz, TomlDottedKeys) {
  EveryReader readers;
  expect_clean(run_cases("toml-dotted-keys", 12, readers.seeds(), case_count(kCiCases), 0,
                         [&](const Bytes& in) { readers.run(in); },
                         EveryReader::keep_reader(with_dotted_key), 90));
}

TEST(Fuzz, TomlDeepAndHugeValues) {
  EveryReader readers;
  expect_clean(run_cases("toml-deep-huge", 13, readers.seeds(), case_count(kCiCases), 0,
                         [&](const Bytes& in) { readers.run(in); },
                         EveryReader::keep_reader(with_deep_or_huge), 90));
}

}  // namespace
}  // namespace tessera::fuzz

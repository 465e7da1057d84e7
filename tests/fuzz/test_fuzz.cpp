// Fuzzing every parser of user files with seeded mutations (fuzz_driver.h):
// tokenizer vocab/merges, the three token formats, checkpoint metadata with
// a re-signed CRC, safetensors import, the TOML config, plan --validate's
// metrics files and import's config.json (the TOML files a user names for
// plan: test_fuzz_toml.cpp). CI runs a few hundred cases per parser; run
// more by hand with
//   TESSERA_FUZZ_CASES=20000 [TESSERA_FUZZ_SEED=7] build/tests/test_fuzz
// Each target reports "N cases: ok, errors (exit 2), failures" on stderr.
#include <gtest/gtest.h>
#include <unistd.h>

#include "fuzz_json.h"
#include "fuzz_scratch.h"
#include "fuzz_targets.h"
#include "tessera/config/config_json.h"
#include "tessera/data/llmc_shard.h"
#include "tessera/data/token_file.h"

namespace tessera::fuzz {
namespace {

constexpr int64_t kCiCases = 1000;  // per parser: 9,000 in all, a few seconds

// The mutator itself: "off by a little" at the int64 limits wraps like a
// file's bytes would (it overflowed a signed sum before; the sanitizer job's
// UBSan stopped Fuzz.HfConfigJson on it). Every integer it returns for
// INT64_MIN/MAX is the limit plus a delta, modulo 2^64, or a fixed value.
TEST(Fuzz, NearValueMutationWrapsAtTheInt64Limits) {
  const std::vector<int64_t> deltas = {1, -1, 4, -4, 64, 1 << 20};
  int near = 0;
  for (const int64_t limit : {INT64_MIN, INT64_MAX}) {
    for (uint64_t i = 0; i < 400; ++i) {
      Rand r(1, 99, i);
      const json v = interesting_value(r, json(limit));
      if (!v.is_number_integer() || v == 0 || v == -1 || v == INT64_MAX || v == INT64_MIN ||
          v == (int64_t(1) << 59) + 16 || v.is_number_unsigned())
        continue;
      bool found = false;
      for (const int64_t d : deltas)
        found |= v.get<int64_t>() == int64_t(uint64_t(limit) + uint64_t(d));
      EXPECT_TRUE(found) << v.dump() << " from " << limit;
      ++near;
    }
  }
  EXPECT_GT(near, 20);  // the "near" branch was reached, both limits
}

TEST(Fuzz, TokenizerVocabAndMerges) {
  ScratchDir s("fuzz_tok");
  data::Tokenizer::from_merges({{'h', 'e'}, {'l', 'l'}, {256, 'o'}, {'o', 'r'}}, {"<|endoftext|>"})
      .save(s.path.string());
  const Bytes seed = get_file(s.path / "vocab.json") + kSplit + get_file(s.path / "merges.txt");
  // Mutations anywhere: the merges (at the end) matter as much as the vocabulary.
  auto structured = [](const Bytes& in, Rand& r) {
    const size_t cut = in.find(kSplit);
    return mutate_json_text(in.substr(0, cut), r) + in.substr(cut);
  };
  expect_clean(run_cases("tokenizer", 1, {seed}, case_count(kCiCases), 0,
                         [&](const Bytes& in) { run_tokenizer(s.path, in); }, structured));
}

TEST(Fuzz, TesseraTokenFile) {
  ScratchDir s("fuzz_tsr");
  std::vector<int32_t> ids(300);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i * 7 % 251);
  data::TokenFileWriter w((s.path / "seed.tok").string(), 256, 0x1234, 0);
  w.append(ids);
  w.close();
  const Bytes seed = get_file(s.path / "seed.tok");
  expect_clean(run_cases("tessera-tokens", 2, {seed}, case_count(kCiCases), 64,
                         [&](const Bytes& in) { run_token_file(s.path, in, "x.tok"); }));
}

TEST(Fuzz, LlmcShard) {
  ScratchDir s("fuzz_llmc");
  std::vector<int32_t> ids(300);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i * 13 % 50257);
  data::write_llmc_shard((s.path / "seed.bin").string(), ids);
  const Bytes seed = get_file(s.path / "seed.bin");
  expect_clean(run_cases("llmc-shard", 3, {seed}, case_count(kCiCases), 16,
                         [&](const Bytes& in) { run_token_file(s.path, in, "x.bin"); }));
}

TEST(Fuzz, MegatronIndex) {
  ScratchDir s("fuzz_mega");
  data::write_megatron_dataset((s.path / "m").string(), {{1, 2, 3}, {4, 5}, {}, {6, 7, 8, 9}});
  const Bytes seed = get_file(s.path / "m.idx");
  expect_clean(run_cases("megatron-idx", 4, {seed}, case_count(kCiCases), 0,
                         [&](const Bytes& in) { run_megatron(s.path, in); }));
}

TEST(Fuzz, CheckpointMetadataResigned) {
  ScratchDir s("fuzz_ckpt");
  const GPTConfig cfg = fuzz_model();
  ParamLayout layout = ParamLayout::build(cfg, ParallelConfig{}, 0, 0);
  GPT model(cfg, layout);
  AdamW optim(layout, AdamWConfig{});
  ckpt::TrainState st;
  st.step = 3;
  const std::string step = ckpt::save_checkpoint(s.path.string(), ckpt::whole_rank(model, &optim),
                                                 st, ckpt::RunInfo{cfg, {}, "bytes"});
  const Bytes seed = get_file(fs::path(step) / "metadata.json");
  expect_clean(run_cases("checkpoint-metadata", 5, {seed}, case_count(kCiCases), 0,
                         [&](const Bytes& in) { run_checkpoint(step, in, model, optim); },
                         mutate_json_text));
}

// The header JSON mutated structurally, its length prefix rewritten to match.
Bytes mutate_safetensors_header(const Bytes& in, Rand& r) {
  uint64_t len = 0;
  std::memcpy(&len, in.data(), 8);
  const Bytes header = mutate_json_text(in.substr(8, size_t(len)), r);
  uint64_t n = header.size();
  return Bytes(reinterpret_cast<const char*>(&n), 8) + header + in.substr(8 + size_t(len));
}

TEST(Fuzz, SafetensorsImport) {
  ScratchDir s("fuzz_st");
  const GPTConfig cfg = fuzz_model();
  ParamLayout layout = ParamLayout::build(cfg, ParallelConfig{}, 0, 0);
  GPT model(cfg, layout);
  ckpt::export_hf_gpt2(model, (s.path / "seed").string());
  const Bytes seed = get_file(s.path / "seed" / "model.safetensors");
  uint64_t header = 0;
  std::memcpy(&header, seed.data(), 8);
  expect_clean(run_cases("safetensors", 6, {seed}, case_count(kCiCases), size_t(8 + header),
                         [&](const Bytes& in) { run_safetensors(s.path, in, model); },
                         mutate_safetensors_header));
}

// The header line mutated structurally, kept on one line (JSON lines).
Bytes mutate_metrics_header(const Bytes& in, Rand& r) {
  const size_t eol = in.find('\n');
  json doc = json::parse(in.substr(0, eol), nullptr, false);
  if (doc.is_discarded()) return mutate(in, r, 0);
  const int n = 1 + int(r.below(3));
  for (int i = 0; i < n; ++i) mutate_json_once(doc, r);
  return doc.dump() + in.substr(eol);
}

// plan --validate's input: wrong-typed header fields once escaped as
// nlohmann type_error (an abort, exit 134).
TEST(Fuzz, PlanRunMetrics) {
  ScratchDir s("fuzz_metrics");
  GPTConfig cfg = fuzz_model();
  ParallelConfig par;
  par.micro_batch = 2;
  par.global_batch = 4;
  const json header = {
      {"run",
       {{"model", model_to_json(cfg)},
        {"parallel", parallel_to_json(par)},
        {"memory_bytes", json::array({{{"params", 1e6}, {"grads", 1e6}, {"optimizer", 2e6},
                                       {"activations", 5e5}}})},
        {"precision", "fp32"}, {"rank", 0}, {"ranks", 1}, {"system", "local"}, {"threads", 2}}}};
  Bytes seed = header.dump() + "\n";
  for (int step = 1; step <= 3; ++step)
    seed += json({{"step", step}, {"step_seconds", 0.01 * step},
                  {"seconds_by_op", {{"gemm", 0.005}, {"attention", 0.001}}}})
                .dump() +
            "\n";
  expect_clean(run_cases("plan-run-metrics", 8, {seed}, case_count(kCiCases), 0,
                         [&](const Bytes& in) { run_metrics_file(s.path, in); },
                         mutate_metrics_header));
}

// tessera import's config.json: optional fields of the wrong type once
// escaped as nlohmann type_error.
TEST(Fuzz, HfConfigJson) {
  const Bytes seed = ckpt::hf_config(fuzz_model()).dump(1);
  expect_clean(run_cases("hf-config", 9, {seed}, case_count(kCiCases), 0,
                         [&](const Bytes& in) { run_hf_config(in); }, mutate_json_text));
}

TEST(Fuzz, TomlConfig) {
  ScratchDir s("fuzz_toml");
  const std::vector<Bytes> seeds = {
      "num-layers = 4\nlr = 3e-4\nsave = \"ck\"\n",
      "# a comment\nsequence-parallel = true\ndata-path = \"a.tok\"\n[table]\nx = 1\n",
      "lr = 0.001\nnum-layers = 2 # trailing\nsave = 'literal'\n",
      // Issue 15 defect 6's numbers, for the mutations to move around.
      "num-layers = 0\nlr = inf\nsave = \"\"\n",
      "num-layers = 9223372036854775807\nlr = nan\n",
  };
  expect_clean(run_cases("toml-config", 7, seeds, case_count(kCiCases), 0,
                         [&](const Bytes& in) { run_config(s.path, in); }));
}

}  // namespace
}  // namespace tessera::fuzz

// Sharded Hugging Face checkpoints (issue 35, item 6): a GPT-2 and a Llama
// export cut into shards with an index import bit for bit as the single
// file does (by the directory, by the index, through `tessera import`); a
// directory holding both reads model.safetensors, as transformers does;
// `export --max-shard-size` writes save_pretrained's layout (shard names,
// sorted weight_map, total_size = data bytes) and reads back bit for bit.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "ckpt_test_util.h"
#include "export_case.h"
#include "fixed_batches.h"
#include "shard_case.h"
#include "tessera/ckpt/checkpoint.h"
#include "tessera/ckpt/durable_io.h"
#include "tessera/ckpt/hf_model.h"
#include "tessera/ckpt/hf_tensors.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using namespace ckpt;
using nlohmann::json;
using test::Exported;
using test::ScratchDir;

GPTConfig llama_config() {
  GPTConfig m = test::tiny_llama();
  m.vocab_size = 300;
  m.num_query_groups = 2;
  m.untie_embeddings = true;
  m.add_bias_linear = true;
  return m;
}

// The model config.json in `dir` describes, filled from `weights`.
std::unique_ptr<GPT> import_from(const std::string& dir, const std::string& weights) {
  const GPTConfig c = model_from_hf(json::parse(read_file(dir + "/config.json")));
  auto m = std::make_unique<GPT>(c, ParamLayout::build(c, ParallelConfig{}, 0, 0));
  import_hf(weights, *m);
  return m;
}

bool same_params(GPT& a, GPT& b) {
  return a.params().nbytes() == b.params().nbytes() &&
         std::memcmp(a.params().data(), b.params().data(), a.params().nbytes()) == 0;
}

// Export x, cut its file into n shards, and import the three ways: the
// single file, the shards' directory and their index.
void check_resharded_imports_bit_for_bit(const GPTConfig& cfg, size_t n, const char* name) {
  ScratchDir dir(name);
  Exported x(cfg);
  export_hf(x.model, dir / "hf");
  const test::Resharded r = test::reshard(dir / "hf/model.safetensors", n);
  test::write_resharded(r, dir / "sharded", dir / "hf");
  // Every shard holds tensors, and together they are all of the file's.
  size_t tensors = 0;
  for (const auto& s : r.shards) {
    EXPECT_GE(s.size(), 3u);
    tensors += s.size();
  }
  EXPECT_EQ(tensors, SafetensorsFile(dir / "hf/model.safetensors").entries().size());

  auto single = import_from(dir / "hf", dir / "hf/model.safetensors");
  auto by_dir = import_from(dir / "sharded", dir / "sharded");
  auto by_index = import_from(dir / "sharded", dir / "sharded/model.safetensors.index.json");
  EXPECT_TRUE(same_params(*single, x.model));
  EXPECT_TRUE(same_params(*by_dir, *single));
  EXPECT_TRUE(same_params(*by_index, *single));
  // Real numbers, not two zero buffers: the embedding's first values.
  EXPECT_NE(by_dir->params().f32()[0], 0.0f);
  EXPECT_EQ(by_dir->params().f32()[7], x.model.params().f32()[7]);

  const HfTensors t(dir / "sharded");
  EXPECT_TRUE(t.sharded());
  EXPECT_EQ(t.source(), dir / "sharded/model.safetensors.index.json");
  EXPECT_EQ(t.entries().size(), tensors);
}

TEST(ShardedImport, Gpt2InThreeShardsImportsBitForBitAsTheSingleFile) {
  check_resharded_imports_bit_for_bit(Exported::gpt2_config(), 3, "sharded_gpt2");
}

TEST(ShardedImport, LlamaInTwoShardsImportsBitForBitAsTheSingleFile) {
  check_resharded_imports_bit_for_bit(llama_config(), 2, "sharded_llama");
}

TEST(ShardedImport, ADirectoryWithBothReadsTheSingleFileAsTransformersDoes) {
  ScratchDir dir("sharded_both");
  Exported a;
  export_hf(a.model, dir / "both");
  // Shards of another model (every value changed) beside a's single file.
  test::Resharded r = test::reshard(dir / "both/model.safetensors", 2);
  for (auto& s : r.shards)
    for (auto& [name, v] : s)
      for (float& f : v.second) f += 1.0f;
  test::write_resharded(r, dir / "both", dir / "both");
  EXPECT_EQ(resolve_hf_weights(dir / "both"), dir / "both/model.safetensors");
  auto by_dir = import_from(dir / "both", dir / "both");
  EXPECT_TRUE(same_params(*by_dir, a.model));
  // Named explicitly, the index is read.
  auto by_index = import_from(dir / "both", dir / "both/model.safetensors.index.json");
  EXPECT_FALSE(same_params(*by_index, a.model));
  EXPECT_EQ(by_index->params().f32()[3], a.model.params().f32()[3] + 1.0f);
}

TEST(ShardedImport, ImportCliTakesTheShardedDirectory) {
  ScratchDir dir("sharded_cli");
  Exported x(llama_config());
  export_hf(x.model, dir / "hf");
  test::write_resharded(test::reshard(dir / "hf/model.safetensors", 3), dir / "sharded", dir / "hf");
  int rc;
  std::string out = test::run_tessera(
      fmt::format("import --input {} --output {}", dir / "sharded", dir / "imported"), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("model.safetensors.index.json"), std::string::npos) << out;
  Checkpoint ck = open_checkpoint(dir / "imported");
  EXPECT_EQ(ck.run.model.summary(), x.cfg.summary());
  EXPECT_EQ(ck.state.extra["imported_from"], dir / "sharded/model.safetensors.index.json");
  std::unique_ptr<GPT> back = load_whole_model(ck);
  EXPECT_TRUE(same_params(*back, x.model));
}

TEST(ShardedExport, MaxShardSizeWritesSavePretrainedsLayoutAndReadsBackBitForBit) {
  ScratchDir dir("sharded_export");
  Exported x(llama_config());
  // A limit the whole model fits in writes the single file, as save_pretrained.
  export_hf(x.model, dir / "one", -1, 1000000000);
  EXPECT_FALSE(fs::exists(dir / "one/model.safetensors.index.json"));
  const uint64_t total = SafetensorsFile(dir / "one/model.safetensors").tensor_bytes();
  EXPECT_GT(total, 100000u);
  const uint64_t limit = 20000;  // bytes: several shards of this ~0.2 MB model
  export_hf(x.model, dir / "hf", -1, limit);
  const json index = json::parse(read_file(dir / "hf/model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
  std::set<std::string> shards;
  for (const auto& [t, s] : index["weight_map"].items()) shards.insert(s.get<std::string>());
  ASSERT_GE(shards.size(), 3u);
  const size_t n = shards.size();
  EXPECT_EQ(*shards.begin(), fmt::format("model-00001-of-{:05d}.safetensors", n));
  EXPECT_EQ(*shards.rbegin(), fmt::format("model-{:05d}-of-{:05d}.safetensors", n, n));
  EXPECT_FALSE(fs::exists(dir / "hf/model.safetensors"));
  // Each shard is within the limit unless it is one larger tensor alone.
  for (const std::string& s : shards) {
    SafetensorsFile f(dir / ("hf/" + s));
    EXPECT_TRUE(f.tensor_bytes() <= limit || f.entries().size() == 1) << s;
    EXPECT_EQ(f.metadata().at("format"), "pt");
  }
  auto back = import_from(dir / "hf", dir / "hf");
  EXPECT_TRUE(same_params(*back, x.model));

  // Exported again as one file into the same directory: the shards and the
  // index go, so no loader can read them instead.
  export_hf(x.model, dir / "hf");
  EXPECT_TRUE(fs::exists(dir / "hf/model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "hf/model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(dir / ("hf/" + *shards.begin())));
  // And sharded again over the single file: the single file goes (a
  // transformers load would have preferred it).
  export_hf(x.model, dir / "hf", -1, limit);
  EXPECT_FALSE(fs::exists(dir / "hf/model.safetensors"));
  EXPECT_TRUE(same_params(*import_from(dir / "hf", dir / "hf"), x.model));
}

TEST(ShardedExport, CliMaxShardSizeRoundTrip) {
  ScratchDir dir("sharded_export_cli");
  Exported x;
  save_checkpoint(dir / "ckpt", whole_rank(x.model, nullptr), TrainState{5},
                  RunInfo{x.cfg, {}, "bytes"});
  int rc;
  std::string out = test::run_tessera(fmt::format("export --checkpoint {} --output {} "
                                                  "--max-shard-size 20KB",
                                                  dir / "ckpt", dir / "hf"),
                                      &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("model.safetensors.index.json"), std::string::npos) << out;
  const json index = json::parse(read_file(dir / "hf/model.safetensors.index.json"));
  std::set<std::string> shards;
  for (const auto& [t, s] : index["weight_map"].items()) shards.insert(s.get<std::string>());
  EXPECT_GE(shards.size(), 2u);
  for (const std::string& s : shards) EXPECT_TRUE(fs::exists(dir / ("hf/" + s))) << s;
  out = test::run_tessera(
      fmt::format("import --input {} --output {}", dir / "hf", dir / "imported"), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_TRUE(same_params(*load_whole_model(open_checkpoint(dir / "imported")), x.model));

  out = test::run_tessera(fmt::format("export --checkpoint {} --output {} --max-shard-size 5TB",
                                      dir / "ckpt", dir / "bad"),
                          &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("--max-shard-size '5TB': not a size"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir / "bad"));
}

// The sharded export read by an independent reader that finds the shards
// as transformers does (hf_checkpoint.py read_weights: the index's map, each
// shard holding exactly what it places there, total_size the data bytes)
// and runs them in PyTorch: the engine's logits and loss.
void check_sharded_export_read_by_pytorch(const GPTConfig& cfg, const char* name) {
  ScratchDir dir(name);
  Exported x(cfg);
  export_hf(x.model, dir / "hf", -1, 20000);
  ASSERT_TRUE(fs::exists(dir / "hf/model.safetensors.index.json"));
  test::write_floats(dir / "logits.f32", x.logits.data(), int64_t(x.logits.size()));
  std::ofstream(dir / "case.json")
      << json({{"tokens", x.tokens}, {"loss", x.loss}, {"logits", dir / "logits.f32"}}).dump();
  const std::string cmd = fmt::format("/usr/bin/python3 {}/tests/ckpt/safetensors_reference.py {} {}",
                                      TESSERA_SOURCE_DIR, dir / "hf", dir / "case.json");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "the PyTorch reader disagrees (output above)";
}

TEST(ShardedExport, Gpt2ShardsReadByPyTorch) {
  check_sharded_export_read_by_pytorch(Exported::gpt2_config(), "sharded_torch_gpt2");
}

TEST(ShardedExport, LlamaShardsReadByPyTorch) {
  check_sharded_export_read_by_pytorch(llama_config(), "sharded_torch_llama");
}

}  // namespace
}  // namespace tessera

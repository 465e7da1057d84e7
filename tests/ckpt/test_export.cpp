// safetensors export/import: the format by hand (round trip, dtypes, bad
// files), Hugging Face names, and end to end through the CLI — the export
// read by an independent Python reader gives the engine's loss, and
// import(export(x)) == x bit for bit. Also `tessera generate` from a checkpoint.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ckpt_test_util.h"
#include "export_case.h"
#include "expect_error.h"
#include "tessera/ckpt/checkpoint.h"
#include "tessera/ckpt/durable_io.h"
#include "tessera/ckpt/hf_gpt2.h"
#include "tessera/ckpt/safetensors.h"
#include "tessera/core/error.h"

namespace tessera {
namespace {

using namespace ckpt;
using test::ScratchDir;

using test::Exported;

std::string run(const std::string& args, int* rc, bool quiet = false) {
  return test::run_tessera(args, rc, quiet);
}

TEST(Safetensors, RoundTripAndHalfPrecision) {
  ScratchDir dir("st_roundtrip");
  std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 7.0f};
  SafetensorsWriter w;
  w.add("a", {2, 3}, a.data());
  w.add("b", {1}, a.data() + 5);
  w.set_metadata("format", "pt");
  w.write(dir / "x.safetensors");
  SafetensorsFile f(dir / "x.safetensors");
  EXPECT_EQ(f.entries().size(), 2u);
  EXPECT_EQ(f.at("a").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f.to_f32("a"), a);
  EXPECT_EQ(f.to_f32("b"), std::vector<float>{7.0f});
  EXPECT_EQ(f.metadata().at("format"), "pt");
  std::string raw = read_file(dir / "x.safetensors");
  uint64_t n;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);  // data aligned

  // F16 and BF16 by hand: 1.5 = 0x3E00 (F16) = 0x3FC0 (BF16); -2 = 0xC000 / 0xC000.
  std::string hdr = R"({"h":{"dtype":"F16","shape":[3],"data_offsets":[0,6]},)"
                    R"("g":{"dtype":"BF16","shape":[2],"data_offsets":[6,10]}})";
  uint64_t len = hdr.size();
  std::ofstream out(dir / "h.safetensors", std::ios::binary);
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << hdr;
  const uint16_t vals[5] = {0x3E00, 0xC000, 0x0001 /* smallest subnormal */, 0x3FC0, 0xC000};
  out.write(reinterpret_cast<const char*>(vals), 10);
  out.close();
  SafetensorsFile h(dir / "h.safetensors");
  EXPECT_EQ(h.to_f32("h"), (std::vector<float>{1.5f, -2.0f, 5.9604645e-8f}));
  EXPECT_EQ(h.to_f32("g"), (std::vector<float>{1.5f, -2.0f}));
}

TEST(Safetensors, BadFilesAreRefusedClearly) {
  ScratchDir dir("st_bad");
  auto err = [&](const std::string& bytes) {
    std::ofstream(dir / "bad.safetensors", std::ios::binary) << bytes;
    return test::error_message([&] { SafetensorsFile f(dir / "bad.safetensors"); });
  };
  EXPECT_NE(err("abc").find("shorter than 8 bytes"), std::string::npos);
  EXPECT_NE(err(std::string("\xff\0\0\0\0\0\0\0{}", 10)).find("runs past the end"), std::string::npos);
  std::string h = R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  std::string bytes(8, '\0');
  bytes[0] = char(h.size());
  EXPECT_NE(err(bytes + h + std::string(8, '\0')).find("outside the data"), std::string::npos);
}

TEST(HfGpt2, NamesAndOrientation) {
  bool tr;
  EXPECT_EQ(hf_name("wte", &tr), "transformer.wte.weight");
  EXPECT_FALSE(tr);
  EXPECT_EQ(hf_name("h.11.attn.qkv.weight", &tr), "transformer.h.11.attn.c_attn.weight");
  EXPECT_TRUE(tr);
  EXPECT_EQ(hf_name("h.0.attn.qkv.bias", &tr), "transformer.h.0.attn.c_attn.bias");
  EXPECT_FALSE(tr);
  EXPECT_EQ(hf_name("h.2.mlp.proj.weight", &tr), "transformer.h.2.mlp.c_proj.weight");
  EXPECT_TRUE(tr);
  EXPECT_EQ(hf_name("h.2.ln_2.bias", &tr), "transformer.h.2.ln_2.bias");
  EXPECT_EQ(hf_name("ln_f.weight", &tr), "transformer.ln_f.weight");
  nlohmann::json c = hf_config(test::tiny_gpt());
  EXPECT_EQ(model_from_hf_config(c).summary(), test::tiny_gpt().summary());
  c["activation_function"] = "relu";
  EXPECT_THROW(model_from_hf_config(c), Error);
}

TEST(Export, ReadByAnIndependentReaderImportedBackBitForBit) {
  ScratchDir dir("export_e2e");
  Exported x;
  save_checkpoint(dir / "ckpt", whole_rank(x.model, nullptr), TrainState{12}, RunInfo{x.cfg, {}, "bytes"});

  int rc;
  std::string out = run(fmt::format("export --checkpoint {} --format safetensors --output {}",
                                    dir / "ckpt", dir / "hf"), &rc);
  ASSERT_EQ(rc, 0) << out;

  nlohmann::json c = {{"tokens", x.tokens}, {"loss", x.loss}};
  std::ofstream(dir / "case.json") << c.dump();
  std::string cmd = fmt::format("/usr/bin/python3 {}/tests/ckpt/safetensors_reference.py {} {}",
                                TESSERA_SOURCE_DIR, dir / "hf", dir / "case.json");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "the Python reader disagrees (output above)";

  out = run(fmt::format("import --input {} --output {}", dir / "hf/model.safetensors",
                        dir / "imported"), &rc);
  ASSERT_EQ(rc, 0) << out;
  Checkpoint ck = open_checkpoint(dir / "imported");
  EXPECT_EQ(ck.state.step, 0);
  EXPECT_FALSE(ck.has_optimizer_state);
  EXPECT_EQ(ck.run.model.summary(), x.cfg.summary());
  std::unique_ptr<GPT> back = load_whole_model(ck);
  ASSERT_EQ(back->params().numel(), x.model.params().numel());
  EXPECT_EQ(std::memcmp(back->params().data(), x.model.params().data(), x.model.params().nbytes()), 0);
  // Fresh optimizer state loads as zeros.
  std::vector<float> m(16, 1.0f), v(16, 1.0f);
  load_optimizer(ck, back->layout(), 0, 16, m.data(), v.data());
  EXPECT_EQ(m, std::vector<float>(16, 0.0f));

  // Names without the "transformer." prefix (the hub's gpt2 file) import too.
  SafetensorsFile f(dir / "hf/model.safetensors");
  SafetensorsWriter w;
  std::vector<std::vector<float>> keep;
  for (const auto& [name, e] : f.entries()) {
    keep.push_back(f.to_f32(name));
    w.add(name.substr(std::string("transformer.").size()), e.shape, keep.back().data());
  }
  w.write(dir / "bare.safetensors");
  ParamLayout L = ParamLayout::build(x.cfg, ParallelConfig{}, 0, 0);
  GPT bare(x.cfg, L);
  import_hf_gpt2(dir / "bare.safetensors", bare);
  EXPECT_EQ(std::memcmp(bare.params().data(), x.model.params().data(), x.model.params().nbytes()), 0);
}

TEST(GenerateCli, StreamsAContinuationFromACheckpoint) {
  ScratchDir dir("generate_cli");
  Exported x;
  save_checkpoint(dir.str(), whole_rank(x.model, nullptr), TrainState{3}, RunInfo{x.cfg, {}, "bytes"});
  int rc;
  std::string args = fmt::format("generate --checkpoint {} --prompt 'Hello' --max-new-tokens 8 "
                                 "--temperature 0", dir.str());
  std::string greedy = run(args, &rc, true);
  ASSERT_EQ(rc, 0) << greedy;
  EXPECT_TRUE(greedy.starts_with("Hello")) << greedy;
  // Why the text ended goes to stderr (stdout above is the text alone).
  EXPECT_NE(run(args, &rc).find("stopped after --max-new-tokens 8"), std::string::npos);
  EXPECT_EQ(run(args + " --no-kv-cache", &rc, true), greedy);
  EXPECT_EQ(run(args + " --top-k 1 --temperature 1.3", &rc, true), greedy);
  std::string sampled = run(fmt::format("generate --checkpoint {} --prompt 'Hi' --seed 5 "
                                        "--temperature 1 --top-p 0.9 --max-new-tokens 8",
                                        dir.str()), &rc, true);
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(sampled.starts_with("Hi")) << sampled;
  // No tokenizer recorded and none given: a clear message.
  ScratchDir bare("generate_cli_notok");
  save_checkpoint(bare.str(), whole_rank(x.model, nullptr), TrainState{3}, RunInfo{x.cfg, {}, ""});
  std::string err = run(fmt::format("generate --checkpoint {} --prompt x", bare.str()), &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(err.find("--tokenizer"), std::string::npos) << err;
}

}  // namespace
}  // namespace tessera

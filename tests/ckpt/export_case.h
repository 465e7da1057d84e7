// Shared by the export tests (GPT-2: test_export.cpp, Llama:
// test_export_llama.cpp, Mixtral: test_export_mixtral.cpp, Qwen2-MoE:
// test_export_qwen2_moe.cpp): running the
// CLI, a small model with a padded vocabulary, distinct norm and bias
// values, fixed tokens and its engine logits and loss on them (what the
// independent Python readers compare), and the export read by PyTorch and
// imported back (expect_reference_and_round_trip).
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt_test_util.h"
#include "fixed_batches.h"
#include "tessera/ckpt/durable_io.h"
#include "tessera/ckpt/hf_index.h"
#include "tessera/ckpt/hf_model.h"
#include "tessera/core/rng.h"
#include "tessera/model/gpt.h"

namespace tessera::test {

// stdout of `tessera args` (with stderr unless quiet); *rc: pclose's status.
inline std::string run_tessera(const std::string& args, int* rc, bool quiet = false) {
  std::string cmd = std::string(TESSERA_BINARY) + " " + args + (quiet ? " 2>/dev/null" : " 2>&1");
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *rc = pclose(p);
  return out;
}

// A small model with a byte-level vocabulary padded in our layout
// (300 -> 384 rows); its logits and loss on fixed tokens.
struct Exported {
  GPTConfig cfg;
  ParamLayout layout;
  GPT model;
  std::vector<std::vector<int32_t>> tokens;  // (B, T + 1)
  std::vector<float> logits;                 // (B, T, vocab)
  float loss = 0;
  static GPTConfig gpt2_config() {
    GPTConfig c = tiny_gpt();
    c.vocab_size = 300;
    c.ffn_hidden_size = 48;  // not 4C: n_inner must be carried
    return c;
  }
  explicit Exported(GPTConfig c = gpt2_config())
      : cfg(c), layout(ParamLayout::build(cfg, ParallelConfig{}, 0, 0)), model(cfg, layout) {
    model.init(21);
    // Non-trivial norm and bias values, so a wrong mapping shows.
    for (const ParamEntry& e : layout.entries())
      if (e.name.find("ln_") != std::string::npos || e.name.ends_with("bias"))
        for (int64_t i = 0; i < e.numel(); ++i)
          model.params().f32()[e.offset + i] += 0.1f * rng_normal(5, uint64_t(e.offset), uint64_t(i));
    const int64_t B = 2, T = cfg.seq_length, V = cfg.vocab_size;
    std::vector<int32_t> in(size_t(B * T)), tgt(size_t(B * T));
    for (int64_t b = 0; b < B; ++b) {
      std::vector<int32_t> row(size_t(T + 1));
      for (int64_t t = 0; t <= T; ++t) row[size_t(t)] = int32_t(rng_u64(3, uint64_t(b), uint64_t(t)) % V);
      for (int64_t t = 0; t < T; ++t) {
        in[size_t(b * T + t)] = row[size_t(t)];
        tgt[size_t(b * T + t)] = row[size_t(t + 1)];
      }
      tokens.push_back(row);
    }
    Activations acts;
    activations_init(acts, model.act_shape(B, T));
    loss = model.forward(acts, in.data(), tgt.data());
    logits.assign(acts.logits, acts.logits + B * T * V);
  }
};

// x's export (config.json and model.safetensors in dir/hf) read by an
// independent PyTorch model of its family from the Hugging Face names alone
// (safetensors_reference.py: x's logits and loss on x's tokens), then
// imported back: config.json describes x's model, and import(export(x)) is
// x bit for bit. `family` names the PyTorch model in a failure ("Llama").
// max_shard_bytes > 0: written as shards and an index (hf_shards.h).
inline void expect_reference_and_round_trip(Exported& x, const ScratchDir& dir,
                                            const char* family, uint64_t max_shard_bytes = 0) {
  ckpt::export_hf(x.model, dir / "hf", 5, max_shard_bytes);
  if (max_shard_bytes > 0)  // the reader and the import then take the index and its shards
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(dir / "hf") / ckpt::kSafetensorsIndexName));
  write_floats(dir / "logits.f32", x.logits.data(), int64_t(x.logits.size()));
  std::ofstream(dir / "case.json") << nlohmann::json({{"tokens", x.tokens},
                                                      {"loss", x.loss},
                                                      {"logits", dir / "logits.f32"}})
                                          .dump();
  const std::string cmd = fmt::format("/usr/bin/python3 {}/tests/ckpt/safetensors_reference.py {} {}",
                                      TESSERA_SOURCE_DIR, dir / "hf", dir / "case.json");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "the PyTorch " << family << " disagrees (output above)";

  const GPTConfig back_cfg =
      ckpt::model_from_hf(nlohmann::json::parse(ckpt::read_file(dir / "hf/config.json")));
  EXPECT_EQ(back_cfg.summary(), x.cfg.summary());
  GPT back(back_cfg, ParamLayout::build(back_cfg, ParallelConfig{}, 0, 0));
  ckpt::import_hf(dir / "hf", back);
  ASSERT_EQ(back.params().nbytes(), x.model.params().nbytes());
  EXPECT_EQ(std::memcmp(back.params().data(), x.model.params().data(), back.params().nbytes()), 0)
      << "import(export(x)) != x";
}

}  // namespace tessera::test

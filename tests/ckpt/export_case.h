// Shared by the export tests (GPT-2: test_export.cpp, Llama:
// test_export_llama.cpp): running the CLI, and a small model with a padded
// vocabulary, distinct norm and bias values, fixed tokens and its engine
// logits and loss on them (what the independent Python readers compare).
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "ckpt_test_util.h"
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

}  // namespace tessera::test

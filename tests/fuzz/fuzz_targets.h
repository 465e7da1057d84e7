// The parsers under fuzz, each as "bytes in, parse, use the result": what a
// user's file goes through from open to the first use. Each writes its input
// into a scratch directory first, because the parsers take paths.
#pragma once
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <CLI/CLI.hpp>

#include "fuzz_driver.h"
#include "tessera/ckpt/checkpoint.h"
#include "tessera/ckpt/crc32c.h"
#include "tessera/ckpt/hf_gpt2.h"
#include "tessera/ckpt/safetensors.h"
#include "tessera/cli/config_file.h"
#include "tessera/cli/train_run.h"
#include "tessera/data/megatron_dataset.h"
#include "tessera/data/token_source.h"
#include "tessera/data/tokenizer.h"
#include "tessera/model/gpt.h"
#include "tessera/optim/adamw.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/run_metrics.h"
#include "tessera/plan/system.h"

namespace tessera::fuzz {

namespace fs = std::filesystem;

inline void put_file(const fs::path& p, const Bytes& b) {
  std::error_code ec;
  fs::remove(p, ec);  // a new inode: never rewrite a file a reader still maps
  std::ofstream f(p, std::ios::binary);
  f.write(b.data(), std::streamsize(b.size()));
}

inline Bytes get_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

// The model every checkpoint and safetensors case is loaded into.
inline GPTConfig fuzz_model() {
  GPTConfig m;
  m.num_layers = 1;
  m.hidden_size = 16;
  m.num_heads = 2;
  m.seq_length = 8;
  m.vocab_size = 40;
  m.make_vocab_size_divisible_by = 8;
  return m;
}

// Tokenizer: the input is "vocab.json bytes \x00SPLIT\x00 merges.txt bytes".
inline const char* kSplit = "\x01SPLIT\x01";

inline void run_tokenizer(const fs::path& dir, const Bytes& in) {
  const size_t cut = in.find(kSplit);
  put_file(dir / "vocab.json", in.substr(0, cut));
  put_file(dir / "merges.txt", cut == Bytes::npos ? Bytes() : in.substr(cut + std::strlen(kSplit)));
  data::Tokenizer tok = data::Tokenizer::load(dir.string());
  std::vector<int32_t> ids = tok.encode("hello world, hello fuzz <|endoftext|> \xff\xfe");
  tok.decode(ids);
}

// Token files: open, check every id, and read a window at each end.
inline void read_tokens(const std::string& path) {
  auto src = data::open_token_source(path, {});
  src->validate_all();
  if (src->size() > 0) {
    src->read(0, std::min<int64_t>(src->size(), 9));
    src->read(src->size() - 1, 1);
  }
}

inline void run_token_file(const fs::path& dir, const Bytes& in, const char* name) {
  put_file(dir / name, in);
  read_tokens((dir / name).string());
}

// Megatron: the input is the .idx; the .bin stays the seed's.
inline void run_megatron(const fs::path& dir, const Bytes& idx) {
  put_file(dir / "m.idx", idx);
  auto src = std::make_unique<data::MegatronDataset>((dir / "m").string());
  for (int64_t d = 0; d <= src->num_documents(); ++d) src->document_start(d);
  read_tokens((dir / "m").string());
}

// Checkpoint: the input is metadata.json, re-signed so its own CRC passes
// (as anyone can do); then open and load into the fuzz model with AdamW.
inline void run_checkpoint(const fs::path& step_dir, const Bytes& md, GPT& model, AdamW& optim) {
  put_file(step_dir / "metadata.json", md);
  put_file(step_dir / "metadata.crc32c", ckpt::crc32c_hex(ckpt::crc32c(md.data(), md.size())) + "\n");
  ckpt::Checkpoint ck = ckpt::open_checkpoint(step_dir.string());
  ckpt::load_into(ck, model, &optim);
}

inline void run_safetensors(const fs::path& dir, const Bytes& in, GPT& model) {
  put_file(dir / "model.safetensors", in);
  ckpt::SafetensorsFile f((dir / "model.safetensors").string());
  for (const auto& [name, e] : f.entries())
    if (e.dtype == "F32" || e.dtype == "F16" || e.dtype == "BF16") f.to_f32(name);
  ckpt::import_hf_gpt2((dir / "model.safetensors").string(), model);
}

// A `tessera train --metrics-file` file, as `plan --validate` reads it: the
// run header (model, parallel, memory) and the step lines.
inline void run_metrics_file(const fs::path& dir, const Bytes& in) {
  put_file(dir / "m.jsonl", in);
  plan::read_run_metrics((dir / "m.jsonl").string());
}

// A Hugging Face config.json, as `tessera import` reads it.
inline void run_hf_config(const Bytes& in) {
  nlohmann::json c;
  try {
    c = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(e.what());  // what cmd_export reports as the file's parse error
  }
  ckpt::model_from_hf_config(c).validate();
}

// TOML config through the real expander, then CLI11 (whose ParseError the
// CLI's main turns into a usage line, as it does for tessera::Error).
inline void run_config(const fs::path& dir, const Bytes& in) {
  put_file(dir / "c.toml", in);
  CLI::App app("tessera");
  CLI::App* train = app.add_subcommand("train");
  int64_t layers = 0;
  double lr = 0;
  std::string save;
  std::vector<std::string> data;
  bool sp = false;
  cli::add_config_file_option(train);  // the TOML --config, as `tessera train` declares it
  train->add_option("--num-layers", layers);
  train->add_option("--lr", lr);
  train->add_option("--save", save);
  train->add_option("--data-path", data);
  train->add_flag("--sequence-parallel", sp);
  const std::string file = (dir / "c.toml").string();
  std::vector<std::string> args = {"tessera", "train", "--config", file};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::vector<std::string> out = cli::expand_config_files(int(argv.size()), argv.data(), app);
  std::reverse(out.begin(), out.end());
  out.pop_back();  // the program name
  try {
    app.parse(out);
  } catch (const CLI::ParseError& e) {
    throw Error(e.what());
  }
}

// A plan of `model` on `sys` on one device, in bf16 (and fp8 where the
// system has its peak): what `tessera plan` computes first with a file it
// read. A file the reader accepted must plan to finite, positive numbers;
// anything else is the silent nan/inf plan of issue 38 (thrown as a
// std::runtime_error, which the driver counts as a failure, not an exit 2).
inline void plan_one_device(const GPTConfig& model, const plan::SystemSpec& sys) {
  for (const bool fp8 : {false, true}) {
    if (fp8 && !(sys.peak_flops_fp8 > 0)) continue;
    plan::PlanLayout L;
    L.par.micro_batch = 1;
    L.par.global_batch = 2;
    L.fp8 = fp8;
    const plan::LayoutCost cost = plan::evaluate_layout(model, sys, L);
    const double t = cost.time.step, m = cost.peak_memory;
    if (!(std::isfinite(t) && t > 0 && std::isfinite(m) && m > 0))
      throw std::runtime_error("accepted, then planned step " + std::to_string(t) + " s, memory " +
                               std::to_string(m) + " bytes" + (fp8 ? " (fp8)" : ""));
  }
}

// A system file as `tessera plan --system FILE` reads it, then planned with
// a small model.
inline void run_system_file(const fs::path& dir, const Bytes& in) {
  put_file(dir / "s.toml", in);
  const plan::SystemSpec sys = plan::load_system_file((dir / "s.toml").string());
  const GPTConfig model{.num_layers = 2, .hidden_size = 64, .num_heads = 4, .seq_length = 32,
                        .vocab_size = 128};
  plan_one_device(model, sys);
}

// A model file as `tessera plan --model FILE` reads it (train's other keys
// allowed), then planned on `sys`.
inline void run_model_file(const fs::path& dir, const Bytes& in, const plan::SystemSpec& sys) {
  put_file(dir / "m.toml", in);
  const GPTConfig model = plan::load_model_file((dir / "m.toml").string(), cli::is_train_flag);
  plan_one_device(model, sys);
}

}  // namespace tessera::fuzz

// `tessera export` and `tessera import`: a checkpoint to and from Hugging
// Face GPT-2, Llama, Mixtral, Qwen2 or Qwen2-MoE (model.safetensors, or its shards and
// model.safetensors.index.json, + config.json), whichever holds the model
// (ckpt/hf_model.h).
#include <fmt/core.h>

#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "tessera/ckpt/checkpoint.h"
#include "tessera/ckpt/durable_io.h"
#include "tessera/ckpt/hf_index.h"
#include "tessera/ckpt/hf_model.h"
#include "tessera/ckpt/hf_shards.h"
#include "tessera/ckpt/hf_tensors.h"
#include "tessera/ckpt/save_dir_owner.h"
#include "tessera/ckpt/step_dirs.h"
#include "tessera/ckpt/tokenizer_files.h"
#include "tessera/cli/commands.h"
#include "tessera/core/error.h"
#include "tessera/core/regular_file.h"
#include "tessera/data/tokenizer.h"

namespace tessera::cli {

namespace {

namespace fs = std::filesystem;

void register_export_cmd(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "export",
      "write a checkpoint as Hugging Face GPT-2, Llama, Mixtral, Qwen2 or Qwen2-MoE, whichever "
      "holds the model "
      "(model.safetensors + config.json)");
  struct Opts {
    std::string checkpoint, format = "safetensors", output, max_shard_size;
  };
  auto o = std::make_shared<Opts>();
  sub->add_option("--checkpoint", o->checkpoint, "checkpoint directory (a step, or a --save directory)")
      ->required();
  sub->add_option("--format", o->format, "output format")
      ->check(CLI::IsMember({"safetensors"}))
      ->capture_default_str();
  sub->add_option("--output", o->output, "directory to write into")->required();
  sub->add_option("--max-shard-size", o->max_shard_size,
                  "write weights larger than this as shards model-0000i-of-0000N.safetensors and "
                  "model.safetensors.index.json, as save_pretrained does (e.g. 5GB, 500MB, 2GiB; "
                  "default: one model.safetensors)");
  sub->callback([o] {
    // A bad size is refused before the checkpoint is read.
    const uint64_t max_shard =
        o->max_shard_size.empty() ? 0 : ckpt::parse_shard_size(o->max_shard_size, "--max-shard-size");
    ckpt::Checkpoint ck = ckpt::open_checkpoint(o->checkpoint);
    for (const auto& n : ck.notes) fmt::print(stderr, "tessera: note: {}\n", n);
    // A model no Hugging Face architecture holds is refused before loading it.
    const ckpt::HfArch arch = ckpt::hf_arch_of(ck.run.model);
    std::unique_ptr<GPT> model = ckpt::load_whole_model(ck);
    const std::string& tok = ck.run.tokenizer;
    // config.json names the tokenizer's <|endoftext|> as bos and eos, as
    // the hub's gpt2 does (generation stops on it).
    int32_t eot = -1;
    if (!tok.empty() && tok != "bytes") {
      try {
        eot = data::Tokenizer::load(tok).eot_id();
      } catch (const Error& e) {
        fmt::print(stderr, "tessera: note: no bos/eos_token_id in config.json: {}\n", e.what());
      }
    }
    ckpt::export_hf(*model, o->output, eot, max_shard);
    // A BPE tokenizer travels along: GPT2TokenizerFast reads the same files.
    if (!tok.empty() && tok != "bytes") {
      for (const char* f : {"vocab.json", "merges.txt"}) {
        std::error_code ec;
        fs::copy_file(fs::path(tok) / f, fs::path(o->output) / f,
                      fs::copy_options::overwrite_existing, ec);
        if (ec) fmt::print(stderr, "tessera: note: tokenizer file {}/{} not copied: {}\n", tok, f, ec.message());
      }
    }
    const bool sharded = fs::exists(fs::path(o->output) / ckpt::kSafetensorsIndexName);
    fmt::print("exported {} (step {}) to {}/{} and config.json ({})\n", ck.path, ck.state.step,
               o->output,
               sharded ? "model.safetensors.index.json, its shards" : "model.safetensors",
               ckpt::hf_arch_name(arch));
  });
}

void register_import_cmd(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "import",
      "make a checkpoint (step 0, weights only) from a Hugging Face GPT-2, Llama, Mixtral, Qwen2 or Qwen2-MoE safetensors "
      "file or sharded checkpoint (config.json says which); train from it with "
      "`train --load DIR --finetune --use-checkpoint-args`");
  struct Opts {
    std::string input, config, output, tokenizer;
  };
  auto o = std::make_shared<Opts>();
  sub->add_option("--input", o->input,
                  "model.safetensors, model.safetensors.index.json (a sharded checkpoint), or "
                  "the directory holding either (model.safetensors first, as transformers)")
      ->required();
  sub->add_option("--config", o->config, "config.json (default: beside the weights)");
  sub->add_option("--output", o->output, "checkpoint directory to create (as --save)")->required();
  sub->add_option("--tokenizer", o->tokenizer,
                  "record this tokenizer ('bytes' or a vocab.json + merges.txt directory)");
  sub->callback([o] {
    // The one writer of --output while the import runs (ckpt/save_dir_owner.h).
    const ckpt::SaveDirLock lock(o->output, "--output");
    // An import is step 0: committing it would point `latest` of a training
    // run's directory at the import and hide the trained steps.
    if (const auto steps = ckpt::list_steps(o->output); !steps.empty())
      fail("--output {} already holds checkpoints (newest {}): import into a new directory",
           o->output, fs::path(steps.front().second).filename().string());
    // The file the weights are read from (a directory's model.safetensors
    // or index); config.json and the tokenizer are looked for beside it.
    const std::string weights = ckpt::resolve_hf_weights(o->input, "--input");
    const fs::path weights_dir = fs::path(weights).parent_path();
    std::string cfg_path =
        o->config.empty() ? (weights_dir / "config.json").string() : o->config;
    require_regular_file(weights, "--input");
    require_regular_file(cfg_path, o->config.empty() ? "config.json next to --input:" : "--config");
    nlohmann::json cfg;
    try {
      cfg = nlohmann::json::parse(ckpt::read_file(cfg_path));
    } catch (const nlohmann::json::exception& e) {
      fail("{}: {}", cfg_path, e.what());
    }
    GPTConfig m = ckpt::model_from_hf(cfg);
    ParamLayout L = ParamLayout::build(m, ParallelConfig{}, 0, 0);
    GPT model(m, L);
    ckpt::import_hf(weights, model);
    ckpt::TrainState st;  // step 0: nothing trained here yet
    // No run has drawn from a seed yet: the first `train --finetune` (or
    // --no-load-rng) run's --seed decides data order and dropout.
    st.has_seed = false;
    st.extra["imported_from"] = fs::absolute(weights).lexically_normal().string();
    std::string tok = o->tokenizer;
    if (tok.empty() && fs::exists(weights_dir / "vocab.json"))
      tok = fs::absolute(weights_dir).string();
    // The tokenizer's files are copied into the checkpoint (tokenizer_files.h).
    const ckpt::RunInfo run{m, ParallelConfig{}, tok, "", ""};
    ckpt::check_tokenizer_sources(run);
    std::string dir =
        ckpt::save_checkpoint(o->output, ckpt::whole_rank(model, nullptr), st, run);
    fmt::print("imported {} ({}) into {}\n", weights, m.summary(), dir);
  });
}

}  // namespace

// Both commands: they are one conversion in two directions.
void register_export(CLI::App& app) {
  register_export_cmd(app);
  register_import_cmd(app);
}

}  // namespace tessera::cli

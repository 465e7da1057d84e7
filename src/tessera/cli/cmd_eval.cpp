// `tessera eval`: the loss and perplexity of a checkpoint (or a Hugging
// Face GPT-2 or Llama safetensors file) on a token file, under any layout. The model
// comes from the checkpoint's metadata, so `tessera eval --checkpoint DIR`
// needs no other flag: it then reads the embedded corpus's validation part,
// as `train` does.
#include <omp.h>

#include <memory>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "tessera/cli/collective_errors.h"
#include "tessera/cli/commands.h"
#include "tessera/comm/grid.h"
#include "tessera/comm/mpi_runtime.h"
#include "tessera/comm/node_local.h"
#include "tessera/config/parallel_fields.h"
#include "tessera/core/error.h"
#include "tessera/core/output_file.h"
#include "tessera/data/data_blend.h"
#include "tessera/data/embedded_corpus.h"
#include "tessera/data/tokenizer_identity.h"
#include "tessera/train/data_setup.h"
#include "tessera/train/evaluator.h"

namespace tessera::cli {

namespace {

struct EvalFlags {
  std::string checkpoint, safetensors, hf_config, json;
  std::vector<std::string> data_paths;
  std::string cache_dir, split;
  double split_valid = -1;  // < 0: not given
  int64_t tp = 1, pp = 1;
  int64_t micro_batch = 0;  // 0: the checkpoint's
  int64_t eval_iters = 0;   // 0: every window
  int threads = 0;
};

// The run as `train` would describe it: the model, the layout and the data
// (TrainConfig is what open_training_data and the layout checks read).
TrainConfig eval_config(const EvalFlags& f, const EvalModel& m, int64_t world) {
  TESSERA_CHECK(f.micro_batch >= 0, "{} must be >= 1 (got {})", flag::micro_batch, f.micro_batch);
  TESSERA_CHECK(f.eval_iters >= 0, "--eval-iters must be >= 0 (got {}; 0: every window)",
                f.eval_iters);
  TESSERA_CHECK(f.threads >= 0 && f.threads <= kMaxThreads,
                "--threads must be in [0, {}] (got {})", kMaxThreads, f.threads);
  TrainConfig c;
  c.model = m.config;
  c.model.attention_dropout = c.model.hidden_dropout = 0;  // evaluation
  c.par.tp = f.tp;
  c.par.pp = f.pp;
  c.par.set_world(world);
  c.par.micro_batch = f.micro_batch > 0 ? f.micro_batch : m.micro_batch;
  c.par.global_batch = c.par.micro_batch * c.par.dp;
  c.data_paths = f.data_paths;
  c.cache_dir = f.cache_dir;
  c.threads = f.threads;
  // The validation part: --split-valid / --split as `train` takes them; a
  // token file given alone is read whole; the embedded corpus holds out
  // `train`'s default share.
  if (f.split_valid >= 0) {
    c.valid_fraction = f.split_valid;
  } else if (!f.split.empty()) {
    const data::SplitFractions s = data::parse_split(f.split);
    c.valid_fraction = s.valid;
    c.test_fraction = s.test;
    TESSERA_CHECK(s.valid > 0, "--split {}: eval reads the validation share, which is 0", f.split);
  } else if (!f.data_paths.empty()) {
    c.valid_fraction = 0;
  }
  TESSERA_CHECK(!data::parse_data_blend(f.data_paths, "--data-path").weighted(),
                "--data-path: eval reads token files end to end, not a weighted blend");
  if (f.data_paths.empty())
    TESSERA_CHECK(m.config.vocab_size >= data::kEmbeddedVocabSize,
                  "vocabulary mismatch: the embedded corpus has {} tokens but the model ({}) only "
                  "{}; pass --data-path with tokens of the model's tokenizer",
                  data::kEmbeddedVocabSize, m.label, m.config.vocab_size);
  c.validate(world);
  return c;
}

void run_eval(const EvalFlags& f) {
  comm::MpiRuntime runtime(nullptr, nullptr);
  std::unique_ptr<comm::Communicator> world = runtime.world();
  const bool log = world->rank() == 0;
  EvalModel m;
  TrainConfig c;
  TrainingData data;
  int64_t windows = 0;
  agree(*world, [&] {
    if (!f.json.empty() && log) check_output_file(f.json, "--json");
    m = open_eval_model(f.checkpoint, f.safetensors, f.hf_config);
    c = eval_config(f, m, world->size());
    omp_set_num_threads(c.threads > 0 ? c.threads : comm::default_threads_per_rank());
    // The data (token files, or the embedded corpus) must be in the
    // model's tokenizer, where both are known.
    data = open_training_data(c, m.config.vocab_size,
                              data::model_tokenizer("the model " + m.label, m.tokenizer,
                                                    m.tokenizer_hash));
    const int64_t available = data.batches->windows(Split::Valid);
    windows = f.eval_iters > 0 ? f.eval_iters * c.par.micro_batch : available;
  });
  comm::Grid grid(*world, c.par);
  if (log) {
    if (!data.note.empty()) fmt::print("data: {}\n", data.note);
    fmt::print("data: {}\n", data.batches->describe());
    fmt::print("model: {} | {}\n", m.label, c.model.summary());
    fmt::print("layout: tp {} x pp {} x dp {} | micro-batch {} | {} thread(s) per rank\n",
               c.par.tp, c.par.pp, c.par.dp, c.par.micro_batch, omp_get_max_threads());
    std::fflush(stdout);
  }
  EvalResult r;
  agree(*world, [&] { r = evaluate_model(m, c, *data.batches, windows, *world, grid); });
  if (!log) return;
  fmt::print("eval: loss {:.6f} | perplexity {:.4f} | {} windows of {} tokens ({} tokens "
             "predicted) | {:.2f} s\n",
             r.loss, r.perplexity(), r.windows, c.model.seq_length + 1, r.tokens, r.seconds);
  if (!f.json.empty()) {
    nlohmann::json j = {{"loss", r.loss},
                        {"perplexity", r.perplexity()},
                        {"windows", r.windows},
                        {"tokens", r.tokens},
                        {"seq_length", c.model.seq_length},
                        {"micro_batch", c.par.micro_batch},
                        {"model", m.label},
                        {"data", data.batches->describe()},
                        {"layout", {{"tp", c.par.tp}, {"pp", c.par.pp}, {"dp", c.par.dp}}},
                        {"seconds", r.seconds}};
    if (m.checkpoint) j["step"] = m.checkpoint->state.step;
    write_output_file(f.json, j.dump(2) + "\n", "--json");
  }
}

}  // namespace

void register_eval(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "eval",
      "loss and perplexity of a checkpoint (or a GPT-2 or Llama safetensors file) on token data");
  auto f = std::make_shared<EvalFlags>();
  sub->add_option("--checkpoint", f->checkpoint,
                  "checkpoint directory (a step directory, or a --save directory: its latest); the "
                  "model's shape comes from it");
  sub->add_option("--safetensors", f->safetensors,
                  "a Hugging Face GPT-2 or Llama model.safetensors (or the "
                  "model.safetensors.index.json of a sharded one) instead of a checkpoint");
  sub->add_option("--hf-config", f->hf_config,
                  "--safetensors: its config.json (default: beside the file)");
  sub->add_option("--data-path", f->data_paths,
                  "token files (tessera, Megatron indexed or llm.c), read end to end as one "
                  "(default: the embedded corpus's validation part)");
  auto* split_valid = sub->add_option("--split-valid", f->split_valid,
                                      "evaluate only this held-out last fraction of the data, as "
                                      "`train --split-valid` holds it out");
  sub->add_option("--split", f->split,
                  "evaluate only the validation share of train,valid,test shares (as `train "
                  "--split`)")
      ->excludes(split_valid);
  sub->add_option("--cache-dir", f->cache_dir,
                  "where the embedded corpus is cached (default: ~/.cache/tessera)");
  sub->add_option(flag::micro_batch, f->micro_batch,
                  "windows per forward (default: the checkpoint's; the total does not depend on "
                  "it)");
  sub->add_option("--eval-iters", f->eval_iters,
                  "read only the first N micro-batches of windows, as `train --eval-iters` does "
                  "(0: every window)")
      ->capture_default_str();
  // Train's layout flags, as train declares them.
  for (auto [name, ranks] : {std::pair{flag::tp, &f->tp}, std::pair{flag::pp, &f->pp}})
    sub->add_option(name, *ranks, parallel_field(name).help)->capture_default_str();
  sub->add_option("--threads", f->threads,
                  "threads per rank (default: the node's cores / the ranks on the node)");
  sub->add_option("--json", f->json, "also write the result as JSON to this file");
  sub->callback([f] { run_eval(*f); });
}

}  // namespace tessera::cli

// `tessera train`: flags use Megatron-LM's names where Megatron has the same
// setting; `--config FILE` reads the same names from a TOML file (flags given
// on the command line win).
#include <omp.h>

#include <memory>

#include <fmt/core.h>

#include "tessera/cli/commands.h"
#include "tessera/core/error.h"
#include "tessera/model/param_layout.h"
#include "tessera/train/data_setup.h"
#include "tessera/train/trainer.h"

namespace tessera::cli {

namespace {

void add_train_options(CLI::App* sub, TrainConfig& c) {
  auto& m = c.model;
  auto& p = c.par;
  auto& o = c.optim;
  sub->add_option("--num-layers", m.num_layers, "transformer layers")->capture_default_str();
  sub->add_option("--hidden-size", m.hidden_size, "hidden size")->capture_default_str();
  sub->add_option("--num-attention-heads", m.num_heads, "attention heads")->capture_default_str();
  sub->add_option("--ffn-hidden-size", m.ffn_hidden_size, "MLP width (0: 4 x hidden)")
      ->capture_default_str();
  sub->add_option("--seq-length", m.seq_length, "tokens per sequence")->capture_default_str();
  sub->add_option("--max-position-embeddings", m.max_position_embeddings,
                  "rows of the position table (0: --seq-length)")
      ->capture_default_str();
  sub->add_option("--make-vocab-size-divisible-by", m.make_vocab_size_divisible_by,
                  "pad the embedding table to a multiple of this (x tensor-parallel size)")
      ->capture_default_str();
  sub->add_option("--init-method-std", m.init_std, "std of the normal weight initialisation")
      ->capture_default_str();
  sub->add_option("--micro-batch-size", p.micro_batch, "sequences per micro-batch")
      ->capture_default_str();
  sub->add_option("--global-batch-size", p.global_batch,
                  "sequences per optimizer step (micro-batch x accumulation steps x dp)")
      ->capture_default_str();
  sub->add_option("--train-iters", c.train_iters, "optimizer steps")->capture_default_str();
  sub->add_option("--lr", o.lr, "peak learning rate")->capture_default_str();
  sub->add_option("--min-lr", o.min_lr, "learning rate at the end of the cosine decay")
      ->capture_default_str();
  sub->add_option("--lr-warmup-iters", o.warmup_iters, "linear warm-up steps")
      ->capture_default_str();
  sub->add_option("--lr-decay-iters", o.decay_iters, "cosine decay ends here (0: --train-iters)")
      ->capture_default_str();
  sub->add_option("--weight-decay", o.weight_decay,
                  "decoupled weight decay (not on biases and LayerNorm)")
      ->capture_default_str();
  sub->add_option("--clip-grad", o.clip_grad, "clip the global gradient norm to this (0: off)")
      ->capture_default_str();
  sub->add_option("--adam-beta1", o.beta1, "AdamW beta1")->capture_default_str();
  sub->add_option("--adam-beta2", o.beta2, "AdamW beta2")->capture_default_str();
  sub->add_option("--adam-eps", o.eps, "AdamW epsilon")->capture_default_str();
  sub->add_option("--seed", c.seed, "seed of initialisation and data sampling")
      ->capture_default_str();
  sub->add_option("--data-path", c.data_paths,
                  "token files: tessera (.tok), Megatron indexed (.bin/.idx prefix) or llm.c "
                  "(.bin) (default: the embedded fortunes corpus)");
  sub->add_option("--vocab-file", c.vocab_file, "GPT-2 style vocab.json of the data's tokenizer");
  sub->add_option("--merge-file", c.merge_file, "GPT-2 style merges.txt of the data's tokenizer");
  sub->add_option("--cache-dir", c.cache_dir,
                  "where the embedded corpus is cached (default: ~/.cache/tessera)");
  sub->add_option("--split-valid", c.valid_fraction, "fraction of the data held out for validation")
      ->capture_default_str();
  sub->add_option("--eval-interval", c.eval_interval, "validation loss every N steps (0: never)")
      ->capture_default_str();
  sub->add_option("--eval-iters", c.eval_iters, "micro-batches per validation")
      ->capture_default_str();
  sub->add_option("--log-interval", c.log_interval, "print a metrics line every N steps")
      ->capture_default_str();
  sub->add_option("--metrics-file", c.metrics_file, "write every step's metrics as JSON lines");
  sub->add_option("--peak-tflops", c.peak_tflops,
                  "peak TFLOP/s per rank for MFU (default: the file of `tessera bench peak`)");
  sub->add_option("--peak-file", c.peak_file, "measured-peak file (default: " +
                                                  default_peak_file() + ")");
  sub->add_option("--threads", c.threads, "threads (default: OpenMP's, usually all cores)");
  sub->add_flag("!--no-progress", c.progress, "no progress bar on a terminal");
  sub->add_option("--save", c.save_dir, "write checkpoints under this directory");
  sub->add_option("--save-interval", c.save_interval, "checkpoint every N steps (0: at the end)")
      ->capture_default_str();
  sub->add_option("--save-keep", c.save_keep, "keep the newest K checkpoints (0: all)")
      ->capture_default_str();
  sub->add_option("--load", c.load_dir,
                  "resume from a checkpoint (a step directory, or a --save directory: its latest)");
}

void run_train(TrainConfig c, int64_t vocab_size_flag) {
  c.model.vocab_size = 2;  // the data decides; validate the rest first
  c.validate(/*world=*/1);
  if (c.threads > 0) omp_set_num_threads(c.threads);
  TrainingData data = open_training_data(c, vocab_size_flag);
  c.model.vocab_size = data.vocab_size;
  c.tokenizer = data.tokenizer_dir;
  c.validate(/*world=*/1);
  if (!data.note.empty()) fmt::print("data: {}\n", data.note);
  fmt::print("data: {}\n", data.batches->describe());
  fmt::print("model: {} | {:.2f} M parameters\n", c.model.summary(),
             double(ParamLayout::count_model_params(c.model)) / 1e6);
  fmt::print("batch: {} | {} tokens per step | {} threads\n", c.par.summary(),
             c.par.global_batch * c.model.seq_length, omp_get_max_threads());
  Trainer trainer(c, *data.batches);
  fmt::print("memory: parameters {:.1f} MB, gradients {:.1f} MB, optimizer {:.1f} MB, "
             "activations {:.1f} MB\n",
             trainer.param_bytes() / 1e6, trainer.grad_bytes() / 1e6,
             trainer.optimizer_bytes() / 1e6, trainer.activation_bytes() / 1e6);
  fmt::print("peak for MFU: {}\n",
             trainer.peak().tflops > 0
                 ? fmt::format("{:.3f} TFLOP/s, {}", trainer.peak().tflops, trainer.peak().source)
                 : trainer.peak().source);
  std::fflush(stdout);
  trainer.run();
}

}  // namespace

void register_train(CLI::App& app) {
  auto* sub = app.add_subcommand("train", "train a GPT model (flags follow Megatron-LM's names)");
  auto cfg = std::make_shared<TrainConfig>();
  auto vocab_size = std::make_shared<int64_t>(0);
  // Expanded into flags by main() before parsing (see config_file.h); listed
  // here so --help shows it.
  sub->add_option("--config", "TOML file of these options: key = long flag name, e.g. num-layers = 6");
  add_train_options(sub, *cfg);
  sub->add_option("--vocab-size", *vocab_size,
                  "model vocabulary (default: the tokenizer's, or the data file's)");
  sub->callback([cfg, vocab_size] { run_train(*cfg, *vocab_size); });
}

}  // namespace tessera::cli

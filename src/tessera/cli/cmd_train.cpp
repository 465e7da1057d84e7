// `tessera train`: flags use Megatron-LM's names where Megatron has the same
// setting; `--config FILE` reads the same names from a TOML file (flags given
// on the command line win).
#include <omp.h>

#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/core.h>

#include "tessera/cli/commands.h"
#include "tessera/core/error.h"
#include "tessera/data/fortunes_corpus.h"
#include "tessera/model/param_layout.h"
#include "tessera/train/token_windows.h"
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
  sub->add_option("--data-path", c.data_path,
                  "text file to train on, read as bytes (default: the embedded fortunes corpus)");
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
}

std::unique_ptr<TokenWindows> load_data(const TrainConfig& c) {
  std::string text, name;
  if (c.data_path.empty()) {
    text = read_fortunes();
    name = fmt::format("fortunes corpus ({})", kFortunesDir);
  } else {
    std::ifstream in(c.data_path, std::ios::binary);
    TESSERA_CHECK(bool(in), "--data-path {}: cannot open for reading", c.data_path);
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
    TESSERA_CHECK(!text.empty(), "--data-path {}: file is empty", c.data_path);
    name = c.data_path;
  }
  return std::make_unique<TokenWindows>(bytes_to_tokens(text), 256, c.seed, c.valid_fraction,
                                        name);
}

void run_train(TrainConfig c) {
  c.model.vocab_size = 256;  // byte-level tokens until a tokenizer is chosen
  c.validate(/*world=*/1);
  if (c.threads > 0) omp_set_num_threads(c.threads);
  auto data = load_data(c);
  fmt::print("data: {}\n", data->describe());
  fmt::print("model: {} | {:.2f} M parameters\n", c.model.summary(),
             double(ParamLayout::count_model_params(c.model)) / 1e6);
  fmt::print("batch: {} | {} tokens per step | {} threads\n", c.par.summary(),
             c.par.global_batch * c.model.seq_length, omp_get_max_threads());
  Trainer trainer(c, *data);
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
  // Expanded into flags by main() before parsing (see config_file.h); listed
  // here so --help shows it.
  sub->add_option("--config", "TOML file of these options: key = long flag name, e.g. num-layers = 6");
  add_train_options(sub, *cfg);
  sub->callback([cfg] { run_train(*cfg); });
}

}  // namespace tessera::cli

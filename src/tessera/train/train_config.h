// TrainConfig: everything `tessera train` takes, as one struct. Flags and
// the TOML config file fill it; validate() checks it before any allocation.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/config/gpt_config.h"
#include "tessera/kernels/precision.h"
#include "tessera/optim/adamw.h"
#include "tessera/optim/loss_scaler.h"
#include "tessera/config/parallel_config.h"

namespace tessera {

// The most OpenMP threads any command starts per rank (--threads): libgomp
// crashes when it cannot create the threads asked for (100,000 here), and
// the largest CPU nodes have under a thousand hardware threads.
inline constexpr int kMaxThreads = 1024;

struct TrainConfig {
  GPTConfig model;
  ParallelConfig par;
  AdamWConfig optim;
  int64_t train_iters = 200;     // --train-iters
  uint64_t seed = 1234;          // --seed
  std::vector<std::string> data_paths;  // --data-path (empty: the embedded corpus)
  std::string vocab_file, merge_file;  // --vocab-file, --merge-file (GPT-2 BPE files)
  std::string cache_dir;               // --cache-dir (embedded corpus; default ~/.cache/tessera)
  double valid_fraction = 0.01;  // --split-valid (or --split's second share)
  double test_fraction = 0;      // --split's third share: held out, never trained on
  std::vector<std::string> valid_data_paths;  // --valid-data-path (replaces the split)
  int64_t eval_interval = 0;     // --eval-interval (0: never)
  int64_t eval_iters = 10;       // --eval-iters
  int64_t log_interval = 10;     // --log-interval
  std::string metrics_file;      // --metrics-file (JSONL, one object per step)
  std::string tensorboard_dir;   // --tensorboard-dir (TensorBoard event files; rank 0 writes)
  double peak_tflops = 0;        // --peak-tflops (stated peak; 0: read --peak-file)
  std::string peak_file;         // --peak-file (written by `tessera bench peak`)
  bool bf16 = false;             // --bf16: GEMMs in bf16, fp32 accumulation
  bool fp16 = false;             // --fp16: GEMMs on fp16 inputs (exclusive with --bf16)
  bool grad_reduce_bf16 = false; // --grad-reduce-in-bf16: dp gradient reductions in bf16 (needs --bf16)
  bool overlap_grad_reduce = false;   // --overlap-grad-reduce: dp reductions run behind backward
  bool overlap_param_gather = false;  // --overlap-param-gather: ZeRO-1/2 gathers run behind the next forward
  Precision precision() const {
    return bf16 ? Precision::Bf16 : fp16 ? Precision::Fp16 : Precision::Fp32;
  }
  // --fp16 loss scaling (Megatron's --loss-scale, --initial-loss-scale,
  // --min-loss-scale, --loss-scale-window, --hysteresis); only with --fp16.
  LossScalerConfig loss_scale;
  int threads = 0;               // --threads (0: OpenMP default; at most kMaxThreads)
  bool progress = true;          // --no-progress turns the terminal progress bar off
  std::string save_dir;          // --save: checkpoint directory (empty: no checkpoints)
  int64_t save_interval = 0;     // --save-interval: every N steps (0: only at the end)
  int save_keep = 0;             // --save-keep: keep the newest K checkpoints (0: all)
  std::string load_dir;          // --load: resume from this checkpoint directory
  // What --load takes from the checkpoint (Megatron's flags; train/load_options.h):
  bool finetune = false;         // --finetune: weights only; step, optimizer and RNG start fresh
  bool no_load_optim = false;    // --no-load-optim: weights, step, seed; fresh AdamW moments
  bool no_load_rng = false;      // --no-load-rng: this run's --seed, not the checkpoint's
  bool use_checkpoint_args = false;  // --use-checkpoint-args: the model's shape from the checkpoint
  bool overwrite_save = false;   // --overwrite-save: --save may hold another run's checkpoints
  std::string tokenizer;         // recorded in checkpoints for generation (set from the data)
  uint64_t tokenizer_hash = 0;   // recorded in checkpoints: the data's tokenizer (0: unknown)
  std::string trace_file;        // --trace: Chrome trace JSON of one step
  int64_t trace_step = 0;        // --trace-step (0: the last step)
  // Stopping early, Megatron's flags (train/exit_conditions.h).
  bool exit_signal_handler = false;  // --exit-signal-handler: SIGTERM/SIGINT save and stop
  double exit_duration_in_mins = 0;  // --exit-duration-in-mins (0: no limit)
  int64_t exit_interval = 0;         // --exit-interval: stop after a multiple of N (0: never)

  // Throws tessera::Error naming the flag of the first bad value.
  void validate(int64_t world) const;
};

}  // namespace tessera

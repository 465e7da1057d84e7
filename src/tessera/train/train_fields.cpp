#include "tessera/train/train_fields.h"

#include <array>

namespace tessera {

namespace {

using A = AdamWConfig;
using L = LossScalerConfig;
using T = TrainConfig;

const std::array<Field<A>, 9> kOptimFields{{
    {"--lr", nullptr, 0, &A::lr, "peak learning rate"},
    {"--min-lr", nullptr, 0, &A::min_lr, "learning rate at the end of the cosine decay"},
    {"--lr-warmup-iters", nullptr, 0, &A::warmup_iters, "linear warm-up steps"},
    {"--lr-decay-iters", nullptr, 0, &A::decay_iters, "cosine decay ends here (0: --train-iters)"},
    {"--weight-decay", nullptr, 0, &A::weight_decay,
     "decoupled weight decay (not on biases and LayerNorm)"},
    {"--clip-grad", nullptr, 0, &A::clip_grad, "clip the global gradient norm to this (0: off)"},
    {"--adam-beta1", nullptr, 0, &A::beta1, "AdamW beta1"},
    {"--adam-beta2", nullptr, 0, &A::beta2, "AdamW beta2"},
    {"--adam-eps", nullptr, 0, &A::eps, "AdamW epsilon"},
}};

const std::array<Field<L>, 4> kLossScaleFields{{
    {"--initial-loss-scale", nullptr, 0, &L::initial_scale, "--fp16: first dynamic loss scale"},
    {"--min-loss-scale", nullptr, 0, &L::min_scale, "--fp16: floor of the dynamic loss scale"},
    {"--loss-scale-window", nullptr, 0, &L::window,
     "--fp16: clean steps before the dynamic scale doubles"},
    {"--hysteresis", nullptr, 0, &L::hysteresis,
     "--fp16: overflows tolerated before the dynamic scale halves"},
}};

const std::array<Field<T>, 2> kTraceFields{{
    {"--trace", nullptr, 0, &T::trace_file,
     "write a Chrome trace (Perfetto / chrome://tracing) of one step, a track per rank: forward, "
     "backward, gradient reduction, optimizer (and every pipeline action under pipeline "
     "parallelism)"},
    {"--trace-step", nullptr, 0, &T::trace_step, "the step to trace (0: the last)"},
}};

const std::array<Field<T>, 6> kLogFields{{
    {"--eval-interval", nullptr, 0, &T::eval_interval, "validation loss every N steps (0: never)"},
    {"--eval-iters", nullptr, 0, &T::eval_iters, "micro-batches per validation"},
    {"--log-interval", nullptr, 0, &T::log_interval, "print a metrics line every N steps"},
    {"--metrics-file", nullptr, 0, &T::metrics_file, "write every step's metrics as JSON lines"},
    {"--tensorboard-dir", nullptr, 0, &T::tensorboard_dir,
     "write TensorBoard event files (loss, lr, grad norm, loss scale, tokens/s, MFU, memory, "
     "validation loss) here"},
    // 0 is "not given": the help says what is used instead.
    {.flag = "--peak-tflops", .json_key = nullptr, .surfaces = 0, .access = &T::peak_tflops,
     .help = "peak TFLOP/s per rank for MFU (default: the CPU's theoretical peak, cores x clock x "
             "FLOPs per cycle)",
     .hide_default = true},
}};

const std::array<Field<T>, 14> kProcessFields{{
    {.flag = "--threads", .json_key = nullptr, .surfaces = 0, .access = &T::threads,
     .help = "threads per rank (default: the node's cores / the ranks on the node)",
     .hide_default = true},
    {.flag = "--no-progress", .json_key = nullptr, .surfaces = 0, .access = &T::progress,
     .help = "no progress bar on a terminal", .negated = true},
    {"--save", nullptr, 0, &T::save_dir, "write checkpoints under this directory"},
    {"--save-interval", nullptr, 0, &T::save_interval, "checkpoint every N steps (0: at the end)"},
    {"--save-keep", nullptr, 0, &T::save_keep, "keep the newest K checkpoints (0: all)"},
    {"--overwrite-save", nullptr, 0, &T::overwrite_save,
     "--save may hold another run's checkpoints: delete them before training (without it such a "
     "directory is refused; resuming with --load of the same directory is always allowed)"},
    {"--load", nullptr, 0, &T::load_dir,
     "resume from a checkpoint (a step directory, or a --save directory: its latest)"},
    {"--finetune", nullptr, 0, &T::finetune,
     "--load the weights only: start at step 1 with a fresh optimizer and this run's --seed (e.g. "
     "from `tessera import`)"},
    {"--no-load-optim", nullptr, 0, &T::no_load_optim,
     "--load weights, step and seed but not the optimizer state (fresh AdamW moments)"},
    {"--no-load-rng", nullptr, 0, &T::no_load_rng,
     "--load without the checkpoint's seed: data order and dropout follow this run's --seed"},
    {"--use-checkpoint-args", nullptr, 0, &T::use_checkpoint_args,
     "take the model's shape (layers, hidden, heads, FFN, sequence, positions, vocabulary) from "
     "the --load checkpoint; it overrides those flags"},
    {"--exit-signal-handler", nullptr, 0, &T::exit_signal_handler,
     "on SIGTERM or SIGINT, finish the step, save (with --save) and exit 128 + signal"},
    {"--exit-duration-in-mins", nullptr, 0, &T::exit_duration_in_mins,
     "after the first step that ends this many minutes after the start, save (with --save) and "
     "exit 0 (0: no limit)"},
    {"--exit-interval", nullptr, 0, &T::exit_interval,
     "after a step that is a multiple of N, save (with --save) and exit 0 (0: never)"},
}};

}  // namespace

std::span<const Field<AdamWConfig>> optim_fields() { return kOptimFields; }
std::span<const Field<LossScalerConfig>> loss_scale_fields() { return kLossScaleFields; }
std::span<const Field<TrainConfig>> trace_fields() { return kTraceFields; }
std::span<const Field<TrainConfig>> log_fields() { return kLogFields; }
std::span<const Field<TrainConfig>> process_fields() { return kProcessFields; }

}  // namespace tessera

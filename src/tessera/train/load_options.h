// What `train --load` takes from a checkpoint, with Megatron-LM's flags:
//
//   --load DIR                 everything: weights, step (LR schedule, data
//                              position), AdamW moments, the --fp16 scaler,
//                              and the seed (which is all our RNG state: noise
//                              is drawn from (seed, step, sample, ...))
//   --no-load-optim            weights, step and seed; fresh AdamW moments
//                              (their bias correction restarts) and scaler
//   --no-load-rng              this run's --seed instead of the checkpoint's
//   --finetune                 weights only: step 1, fresh optimizer, this
//                              run's --seed (an import, or another run's model)
//   --use-checkpoint-args      the model's shape (layers, hidden, heads, FFN,
//                              sequence, positions, vocabulary) from the
//                              checkpoint; it overrides the command line's
//                              flags, as in Megatron, and says so (but a
//                              fine-tune keeps a --seq-length it is given)
//
// Everything here reads only metadata.json: it runs on every rank before
// any model is allocated, so a wrong --load is one line and exit 2.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "tessera/ckpt/checkpoint.h"
#include "tessera/train/train_config.h"

namespace tessera {

// --use-checkpoint-args: c.model's shape from ck. explicit_flags: the model
// flags given on the command line (or --config); each one the checkpoint
// overrides with another value gets a note ("--num-layers 6 replaced by the
// checkpoint's 4"). Returns the notes.
std::vector<std::string> apply_checkpoint_args(TrainConfig& c, const ckpt::Checkpoint& ck,
                                               const std::set<std::string>& explicit_flags);

// The model ck holds as this run must match it: with --finetune any
// sequence length (the positions, which are parameters, must still match).
GPTConfig compared_model(const TrainConfig& c, const ckpt::Checkpoint& ck);

// Throws tessera::Error naming --load and the flag to pass when ck cannot
// give what c asks of it: optimizer state that is not there (an import needs
// --finetune or --no-load-optim), another seed without --no-load-rng, another
// model (ckpt::check_same_model).
void check_load_options(const TrainConfig& c, const ckpt::Checkpoint& ck);

// What the run takes from ck, for the log: "weights, step 100, optimizer, seed".
std::string describe_load(const TrainConfig& c, const ckpt::Checkpoint& ck);

// The optimizer state and step are loaded (plain --load, --no-load-rng).
inline bool loads_optimizer(const TrainConfig& c) { return !c.finetune && !c.no_load_optim; }
inline bool loads_step(const TrainConfig& c) { return !c.finetune; }
inline bool loads_seed(const TrainConfig& c) { return !c.finetune && !c.no_load_rng; }

}  // namespace tessera

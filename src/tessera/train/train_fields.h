// The rest of `tessera train`'s settings declared as tables (config/field.h),
// beside the model's (model_fields.h), the layout's (parallel_fields.h) and
// the layout's switches of TrainConfig (run_fields.h): flags and --config
// keys only, no file of the planner's or the tuner's holds them. One table
// per group of --help, in its order (cmd_train.cpp adds them between the
// options that are not plain fields: --seed's check, the data paths and
// --split, which exclude one another, --peak-file's default, --loss-scale).
#pragma once
#include <span>

#include "tessera/config/field.h"
#include "tessera/optim/adamw.h"
#include "tessera/optim/loss_scaler.h"
#include "tessera/train/train_config.h"

namespace tessera {

// The optimizer and its schedule: --lr ... --adam-eps.
std::span<const Field<AdamWConfig>> optim_fields();
// --fp16's dynamic loss scaling: --initial-loss-scale ... --hysteresis.
std::span<const Field<LossScalerConfig>> loss_scale_fields();
// The Chrome trace of one step: --trace, --trace-step.
std::span<const Field<TrainConfig>> trace_fields();
// Validation, logging and the metrics' outputs: --eval-interval ...
// --peak-tflops.
std::span<const Field<TrainConfig>> log_fields();
// The rank's threads, the progress bar, checkpoints, resuming and
// stopping early: --threads ... --exit-interval.
std::span<const Field<TrainConfig>> process_fields();

}  // namespace tessera

// Trainer: the training loop of one rank — micro-batches with gradient
// accumulation, global-norm clipping, AdamW with warm-up + cosine LR, NaN
// detection, step metrics.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tessera/model/activations.h"
#include "tessera/model/gpt.h"
#include "tessera/optim/adamw.h"
#include "tessera/optim/lr_schedule.h"
#include "tessera/train/batch_source.h"
#include "tessera/train/peak.h"
#include "tessera/train/step_stats.h"
#include "tessera/train/train_config.h"

namespace tessera {

class Trainer {
 public:
  // cfg must be validated; data must outlive the trainer.
  Trainer(const TrainConfig& cfg, const BatchSource& data);

  // One optimizer step (1-based). Throws tessera::Error on a NaN/Inf loss or gradient.
  StepStats train_step(int64_t step);

  // Mean loss over eval_iters micro-batches of the validation split (a fixed set).
  float evaluate();

  // Steps after the loaded checkpoint (or 1) .. train_iters with logging and
  // checkpoints; on_step (optional) sees every step.
  void run(const std::function<void(const StepStats&)>& on_step = {});

  // Loads parameters and optimizer state of a checkpoint (--load); returns
  // the step it was written at. The next step to run is that + 1.
  int64_t load(const std::string& dir);
  // Writes a checkpoint of the state after `step` under cfg.save_dir.
  std::string save(int64_t step);

  GPT& model() { return *model_; }
  AdamW& optimizer() { return *optim_; }
  const Peak& peak() const { return peak_; }
  // Bytes of parameters, gradients, optimizer state and activations on this rank.
  int64_t param_bytes() const { return int64_t(model_->params().nbytes()); }
  int64_t grad_bytes() const { return int64_t(model_->grads().nbytes()); }
  int64_t optimizer_bytes() const { return optim_->state_bytes(); }
  int64_t activation_bytes() const { return acts_.bytes(); }

 private:
  float run_micro_batch(Split split, int64_t first_sample, bool backward, float dloss);

  TrainConfig cfg_;
  const BatchSource& data_;
  std::unique_ptr<GPT> model_;
  std::unique_ptr<AdamW> optim_;
  LrSchedule lr_;
  Activations acts_;
  Peak peak_;
  Profile profile_;
  std::vector<int32_t> window_, inputs_, targets_;  // (B, T + 1), (B, T), (B, T)
  int64_t start_step_ = 1;
};

}  // namespace tessera

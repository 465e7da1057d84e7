// One training micro-batch of a model through the engine itself on this
// rank: GPT forward + backward, no parallelism, random tokens, dropout as
// the model sets it, on the kernel backend given. What calibration times
// (calibrate_step.cpp, kernel_rates.cpp): the kernels one after the other
// on activations far larger than the caches, as in training.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/config/gpt_config.h"
#include "tessera/core/profile.h"
#include "tessera/kernels/precision.h"
#include "tessera/model/activations.h"
#include "tessera/model/gpt.h"
#include "tessera/model/param_layout.h"

namespace tessera::kernels {
class Backend;
}

namespace tessera::plan {

class TrainingStep {
 public:
  // backend: null for the CPU backend; else it must outlive the step.
  TrainingStep(const GPTConfig& model, int64_t micro_batch, Precision precision,
               const kernels::Backend* backend = nullptr);
  TrainingStep(const TrainingStep&) = delete;
  TrainingStep& operator=(const TrainingStep&) = delete;

  // One forward and backward, its time by kind of work into `profile` (may be null).
  void run(Profile* profile);

 private:
  GPTConfig config_;
  ParamLayout layout_;
  GPT model_;
  Activations acts_;
  std::vector<int32_t> inputs_, targets_;  // (B, T) each
  float loss_scale_ = 1.0f;
};

}  // namespace tessera::plan

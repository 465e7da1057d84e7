// Trainer: the training loop of one rank — micro-batches with gradient
// accumulation, data parallelism with ZeRO 0-3 (DataParallel), global-norm
// clipping, AdamW with warm-up + cosine LR, NaN detection, step metrics and
// checkpoints. One process is the special case dp = 1 of the same code.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/comm/communicator.h"
#include "tessera/model/activations.h"
#include "tessera/model/gpt.h"
#include "tessera/optim/adamw.h"
#include "tessera/optim/lr_schedule.h"
#include "tessera/parallel/data_parallel.h"
#include "tessera/parallel/pipeline_executor.h"
#include "tessera/train/batch_source.h"
#include "tessera/train/exit_conditions.h"
#include "tessera/train/peak.h"
#include "tessera/train/step_stats.h"
#include "tessera/train/train_config.h"

namespace tessera {

namespace comm {
class Grid;
}

class Trainer {
 public:
  // cfg must be validated; data must outlive the trainer. world and grid:
  // the world and process grid of a multi-rank run (both outlive the
  // trainer); null for one process.
  Trainer(const TrainConfig& cfg, const BatchSource& data, comm::Communicator* world = nullptr,
          comm::Grid* grid = nullptr);
  ~Trainer();

  // One optimizer step (1-based). Throws tessera::Error, on every rank
  // alike, on a NaN/Inf loss or gradient.
  StepStats train_step(int64_t step);

  // Mean loss over eval_iters micro-batches of the validation split (a fixed
  // set, shared out over the dp ranks).
  float evaluate();

  // Steps after the loaded checkpoint (or 1) .. train_iters with logging and
  // checkpoints; on_step (optional) sees every step. Returns why it stopped
  // early (--exit-signal-handler, --exit-duration-in-mins, --exit-interval;
  // the state after that step saved with --save), nullopt when it ran to
  // the end.
  std::optional<EarlyExit> run(const std::function<void(const StepStats&)>& on_step = {});

  // Loads what cfg's --load flags ask for from a checkpoint (parameters,
  // and unless --finetune / --no-load-optim the optimizer state; see
  // train/load_options.h); returns the step training continues after (the
  // checkpoint's, or 0 with --finetune). The next step to run is that + 1.
  int64_t load(const std::string& dir);
  // Writes a checkpoint of the state after `step` under cfg.save_dir
  // (collective over the world).
  std::string save(int64_t step);

  GPT& model() { return *model_; }
  AdamW& optimizer() { return dp_->optimizer(); }
  DataParallel& data_parallel() { return *dp_; }
  const Peak& peak() const { return peak_; }
  bool is_logging_rank() const { return world_->rank() == 0; }
  MemoryBytes model_state_bytes() const { return dp_->memory(); }
  // The first line of the metrics file: model, layout, every rank's memory
  // (the schema `tessera plan --validate` reads; docs/planner.md).
  // Collective over the world.
  nlohmann::json run_header() const;
  // Every rank's {params, grads, optimizer, activations} bytes, rank order
  // (collective over the world).
  std::vector<MemoryBytes> memory_by_rank() const;
  int64_t activation_bytes() const { return pipe_ ? pipe_->activation_bytes() : acts_.bytes(); }

 private:
  // One training micro-batch of a step without pipelining.
  struct MicroBatch {
    int64_t step = 0;          // the optimizer step it belongs to (its dropout masks)
    int64_t index = 0;         // k of the step's accumulation steps
    int64_t first_sample = 0;  // its first sample (layout-independent numbering)
    float dloss = 0;           // d(mean loss)/d(token loss), times the fp16 loss scale
    // The traced step's list (--trace), which gets this micro-batch's forward
    // and backward as micro-batch `index`; null when not tracing.
    std::vector<TraceSpan>* spans = nullptr;
  };
  // Forward and backward of `mb`; returns its loss.
  float run_micro_batch(const MicroBatch& mb);
  // Whether --trace records `step`, and (collective over the world) writing
  // the trace of every rank's spans, said on the logging rank.
  bool traced(int64_t step) const;
  void write_trace(int64_t step, const std::vector<TraceSpan>& mine);
  // Dropout of training sample first_sample.. at `step` (model/activations.h).
  DropoutContext train_dropout(int64_t step, int64_t first_sample) const;
  // The window of sample `first` + b for b < B, as inputs and targets (B, T),
  // or under cp this rank's rows of them (B, T / cp).
  void load_batch(Split split, int64_t first_sample, int32_t* inputs, int32_t* targets);
  // One step through the pipeline executor; fills loss, norm, lr, bubble.
  void pipelined_step(int64_t step, StepStats& s);
  // Gradient norm, clipping, optimizer: the end of every step.
  void finish_step(int64_t step, float loss, StepStats& s);

  TrainConfig cfg_;
  const BatchSource& data_;
  std::unique_ptr<comm::Communicator> local_world_, local_dp_;  // one process: no MPI needed
  comm::Communicator* world_ = nullptr;
  comm::Communicator* dp_group_ = nullptr;
  // Context parallelism: the cp group (null without it) and the global
  // positions of this rank's rows of each sequence (Tl; empty: all T).
  comm::Communicator* cp_group_ = nullptr;
  std::vector<int64_t> cp_rows_;
  int64_t tp_rank_ = 0, pp_rank_ = 0;
  std::unique_ptr<GPT> model_;
  std::unique_ptr<LossScaler> scaler_;  // --fp16 only
  std::unique_ptr<DataParallel> dp_;
  std::unique_ptr<PipelineExecutor> pipe_;  // pp > 1
  comm::Grid* grid_ = nullptr;
  LrSchedule lr_;
  Activations acts_;
  MoeStepSums moe_sums_;  // the step's MoE routing stats (train/moe_metrics.h)
  Peak peak_;
  Profile profile_;
  std::vector<int32_t> window_, inputs_, targets_;  // (B, T + 1), (B, Tl), (B, Tl); Tl = T / cp
  int64_t start_step_ = 1;
  // Steps before the optimizer's first: AdamW's bias correction counts from
  // its own first step (fresh moments after --no-load-optim at step k).
  int64_t optim_step_base_ = 0;
};

}  // namespace tessera

// PipelineExecutor: runs this rank's schedule (schedule.h) for one optimizer
// step on a GPT that holds one pipeline stage (its v chunks).
//
// Per step: every Forward/Backward runs one (micro-batch, chunk) through
// GPT::forward_stage / backward_stage; activations travel over the pp group
// as (Ns, C) tensors (each tp rank to the same tp rank of the neighbour
// stage), tagged by (kind, micro-batch, boundary). Receives are posted as
// early as their buffer exists, sends are isends, a Recv* action is the
// wait. Gradients accumulate in model.grads() across micro-batches. At
// ReduceGrads the tied token embedding's gradient is summed between the
// first and last stage (grid.embedding()), then the caller's reduction runs
// (data parallelism); OptimizerStep runs the caller's optimizer.
//
// zbv (ChunkPlacement::V, config/chunk_placement.h): the peers and tags
// follow the placement; the last rank's two chunks of a micro-batch meet on
// the rank, so chunk 1's input is copied from chunk 0's output and chunk 1's
// input gradient into chunk 0's dresid, where the messages would have gone;
// rank 0 holds the embedding and the head, so the tied table's gradient
// sums in place and the loss comes from rank 0.
//
// Activation memory: slots, not micro-batches. A slot is one Activations of
// the chunk shape (GPT::stage_act_shape); the executor allocates
// peak_in_flight(schedule) of them and hands a slot to a (micro-batch,
// chunk) from its receive (or first-chunk Forward) until its Backward has
// issued the send of its input-gradient (that send keeps reading the slot's
// dresid until the next owner writes it: its gradient receive or backward
// waits for it, its activation receive does not) (under a split backward, zb-h1:
// until its BackwardWeight, which reads the saved GEMM inputs and the
// output gradients its BackwardInput stashed in the slot), in schedule
// order, so the peak is exactly the schedule's: 1F1B min(m, p - rank),
// GPipe m, ZB-H1 min(m, p).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tessera/comm/grid.h"
#include "tessera/core/profile.h"
#include "tessera/model/gpt.h"
#include "tessera/parallel/pipeline_trace.h"
#include "tessera/parallel/schedule.h"

namespace tessera {

struct PipelineOptions {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int64_t virtual_stages = 1;  // v: chunks per rank (> 1 for Interleaved; 2 for zbv)
  int64_t micro_batches = 1;   // m per step (per dp rank)
  int64_t micro_batch = 1;     // B sequences per micro-batch
  int64_t seq_length = 1;      // T
  // Where the model's kernels are timed (core/profile.h; null: nowhere):
  // every slot's activations carry the pointer the model's kernel calls read.
  Profile* profile = nullptr;
  // Where every slot's forwards add their MoE layers' routing stats (null: nowhere).
  MoeStepSums* moe_sums = nullptr;
};

struct PipelineCallbacks {
  // Fill inputs and targets (B, T) of micro-batch `mb` (0..m-1 of this
  // step). Called only on ranks whose chunks embed or compute the loss,
  // once per micro-batch and chunk that needs them.
  std::function<void(int64_t mb, int32_t* inputs, int32_t* targets)> data;
  // Optional: where micro-batch `mb`'s dropout masks come from (every rank,
  // every chunk; the same for its Forward and Backward). Unset: no dropout.
  std::function<DropoutContext(int64_t mb)> dropout;
  // Optional: around every layer of every Forward/Backward (rank-local
  // layer index, as GPT::forward takes them), e.g. the ZeRO engine.
  LayerHooks* hooks = nullptr;
  // Optional: just before / after each Backward (under a split backward,
  // zb-h1: each BackwardWeight, which completes the layers' gradients).
  // `last` is true for the chunk's final one of the step, after which its
  // layers' gradients are complete (a dp engine may start reducing them).
  std::function<void(int64_t mb, int64_t chunk, bool last)> before_backward;
  std::function<void(int64_t mb, int64_t chunk)> after_backward;
  // At ReduceGrads, after the tied-embedding sum: e.g. the dp reduction.
  std::function<void()> reduce_grads;
  // At OptimizerStep.
  std::function<void()> optimizer_step;
};

// What one step measured on this rank.
struct PipelineStepStats {
  float loss = 0.0f;  // mean over the m micro-batches, the same on every pp rank
  // Idle over total: time spent waiting in Recv* actions divided by the time
  // from the step's start to the end of the rank's last pipeline action
  // (ReduceGrads / OptimizerStep excluded). With equal costs and free
  // transfers this is (p-1)/(m+p-1) for GPipe/1F1B, which is NOT the
  // simulator's bubble_fraction, bubble over ideal (p-1)/m (schedule_sim.h),
  // of the same run: hence a different name.
  double idle_fraction = 0.0;
  double wait_seconds = 0.0, pipeline_seconds = 0.0;
  std::vector<TraceSpan> spans;  // every action of the step, in list order
};

class PipelineExecutor {
 public:
  // grid: pp() carries the activations, embedding() the tied-embedding sum.
  // model: this rank's stage (layout built with this rank's pp coordinate
  // and options.virtual_stages). Validates the schedule (schedule_validate).
  PipelineExecutor(GPT& model, comm::Grid& grid, const PipelineOptions& options);
  ~PipelineExecutor();

  // One optimizer step. dloss: d(step loss)/d(token loss), as GPT::backward
  // takes it (1 / (global batch * T) for the mean over the global batch).
  PipelineStepStats step(const PipelineCallbacks& cb, float dloss);

  // Evaluation: micro-batches 0..m-1 forward only (build_forward_schedule),
  // through this step's activation slots (any m >= 1; no dropout, no
  // gradients). Uses cb.data and cb.hooks only. Returns each micro-batch's
  // mean loss (m,), computed on the last stage and broadcast over pp, so
  // every pp rank returns the same. Collective over the pp group.
  std::vector<float> forward_only(const PipelineCallbacks& cb, int64_t m);

  // The step's mean loss, once its ReduceGrads has begun (for the
  // callbacks: e.g. stop on a NaN before the optimizer runs).
  float loss() const { return loss_; }
  const std::vector<Action>& actions() const { return actions_; }
  int64_t slots() const { return int64_t(slots_.size()); }
  // Bytes of every activation slot allocated (the stage's activation
  // memory), with the split backward's stashes (zb-h1).
  int64_t activation_bytes() const;

 private:
  struct Slot;
  struct StepState;  // one step's slot bookkeeping (pipeline_executor.cpp)
  int64_t tag(const Action& a) const;
  void run_action(StepState& ss, const Action& a, const PipelineCallbacks& cb, float dloss);
  void run_forward(StepState& ss, const Action& a, const PipelineCallbacks& cb);
  void run_backward(StepState& ss, const Action& a, const PipelineCallbacks& cb, float dloss);
  void run_backward_weight(StepState& ss, const Action& a, const PipelineCallbacks& cb);
  void run_reduce_grads(StepState& ss, const PipelineCallbacks& cb);
  Slot* take_local_input(StepState& ss, const Action& a, Slot* s);

  GPT& model_;
  comm::Grid& grid_;
  PipelineOptions opt_;
  int64_t p_ = 1, rank_ = 0;
  std::vector<Action> actions_;
  std::vector<StageChunk> chunks_;
  ChunkPlacement placement_ = ChunkPlacement::RoundRobin;  // where the chunks live (zbv: V)
  int64_t head_rank_ = 0;  // the pp rank of the last global chunk (head, loss)
  // Per local chunk: the local chunk before it in the model when that is on
  // this rank too (zbv's V on the last rank: chunk 1 after chunk 0), else -1.
  std::vector<int64_t> prev_here_;
  std::vector<std::unique_ptr<Slot>> slots_;
  bool split_ = false;  // the schedule splits backward (BackwardInput / BackwardWeight)
  float loss_ = 0.0f;
};

}  // namespace tessera

// DataParallel: data parallelism with ZeRO stages 0-3 over the dp group, as
// LayerHooks the model calls around every layer.
//
//   stage 0  gradients all-reduced; every rank keeps everything.
//   stage 1  AdamW moments sharded: gradients reduce-scattered (in place,
//            into the full gradient buffer), each rank updates its slice of
//            the parameters, then parameters are all-gathered.
//   stage 2  gradients sharded too: no full gradient buffer. Each unit's
//            gradient lives in a buffer only from its backward until its
//            reduce-scatter into the rank's gradient shard has finished
//            (under a split backward, zb-h1 / zbv: from its first input
//            pass to its chunk's last weight pass of the step;
//            DataParallelOptions::split_backward).
//   stage 3  parameters sharded too: a layer's parameters are all-gathered
//            just before its forward and again before its backward and
//            freed after each; the embeddings and final norm (the tied head
//            needs them at both ends) are gathered for the whole step.
//
// Shards are ZeroPartition's: slice r of every unit. Under expert
// parallelism an MoE layer's expert unit (this rank's E / ep experts) is
// reduced, sharded and gathered over the expert-data-parallel group (the
// ranks holding the same experts), every other unit over dp x cp; the
// gradient norm counts each expert element once. Reductions are issued
// per unit as soon as backward has finished the unit and run asynchronously
// while backward continues (stages 0-1 on the step's last micro-batch, after
// local accumulation; stages 2-3 on every micro-batch, since there is no full
// buffer to accumulate in). Unit sizes divide by dp, so no buffer is
// truncated: the padding is part of the unit and stays zero.
//
// Mixed precision (--bf16 / --fp16, GPTOptions::precision):
// the 16-bit working copy of the parameters is written by AdamW as it
// updates them (no separate cast pass). Stages 0-2 keep it full size in the
// model (stages 1-2 cast the slices the other ranks updated after the
// parameter all-gather); stage 3 keeps only this rank's shard of it and
// all-gathers units in 16 bits (half the bytes of fp32), widening each
// gathered unit to fp32 for the non-GEMM kernels (LayerNorm, biases,
// embedding lookups): under ZeRO-3 those read the 16-bit values, elsewhere
// the fp32 master values. The copy is counted in memory().params.
// Gradients are accumulated and, by default, reduced in fp32; with
// DataParallelOptions::grad_reduce_bf16 they are rounded to bf16 for the
// reduction only.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "tessera/comm/communicator.h"
#include "tessera/core/buffer.h"
#include "tessera/core/profile.h"
#include "tessera/model/gpt.h"
#include "tessera/optim/adamw.h"
#include "tessera/parallel/memory_bytes.h"
#include "tessera/parallel/zero_partition.h"

namespace tessera {

// How a DataParallel runs, fixed for its life. The defaults: fp32
// reductions, nothing overlapped, nothing timed.
struct DataParallelOptions {
  // --grad-reduce-in-bf16 (needs bf16 GEMMs): data-parallel gradient
  // reductions move and sum bf16 (half the bytes) instead of fp32.
  bool grad_reduce_bf16 = false;
  // --overlap-grad-reduce (Megatron's name and default, off): on, each
  // unit's reduction starts as soon as backward has finished it and runs
  // while backward goes on. Off, stages 0-1 start every reduction after the
  // last micro-batch's backward, and stages 2-3 (which free a unit's
  // gradient once reduced) wait for each one layer later, so at most two
  // units' gradients are held. Same reductions of the same buffers either
  // way: the numbers are identical.
  bool overlap_grad_reduce = false;
  // --overlap-param-gather (stages 1-2): the all-gather of the updated
  // parameters after the optimizer is left running; the next step's forward
  // waits for each unit just before its layer (the embeddings and final
  // norm at begin_step). Off, the optimizer step waits for all of them.
  bool overlap_param_gather = false;
  // The pipeline schedule splits backward into input and weight passes
  // (zb-h1, zbv). Stages 2-3 then keep one gradient buffer per layer unit
  // for the step, from the unit's first input pass to its chunk's last
  // weight pass (begin_chunk_backward's `last`), and reduce-scatter it once,
  // after that: the input passes write the norms' gradients and the weight
  // passes the GEMMs', micro-batches apart, so no per-micro-batch buffer is
  // ever complete on its own. What it costs: the stage's layer gradients
  // are held unsharded across the backward half of the step (as stage 1's
  // full buffer), counted by the planner and the memory check. Stage 3
  // gathers a layer's parameters for its input pass and again for its
  // weight pass, freeing them after each (three gathers a micro-batch, not
  // two; the weight pass reads them to recompute and as GEMM operands).
  bool split_backward = false;
  // Where the communication, casts and optimizer are timed (null: nowhere).
  Profile* profile = nullptr;
  // Expert parallelism (the layout's expert units, ParamUnit::expert): the
  // expert-data-parallel group, which reduces and shards them (null: the dp
  // group itself, no expert parallelism), and the ep group (null or size 1:
  // none), over which ZeRO-0's gradient norm adds up the experts' squares.
  comm::Communicator* expert_dp = nullptr;
  comm::Communicator* ep = nullptr;
};

class DataParallel : public LayerHooks {
 public:
  // model must have been built with own_params = (zero_stage < 3) and
  // own_grads = (zero_stage < 2). dp (and tp, the model's tensor-parallel
  // group or null) outlive this object.
  // pp: the pipeline group (null: one stage). The last stage's copy of the
  // tied embedding is left out of the gradient norm (the first stage's counts).
  DataParallel(GPT& model, comm::Communicator& dp, int zero_stage, const AdamWConfig& optim,
               comm::Communicator* tp = nullptr, comm::Communicator* pp = nullptr,
               const DataParallelOptions& options = {});
  ~DataParallel() override;

  void init_params(uint64_t seed);
  // The parameters were changed from outside (a checkpoint load): the next
  // begin_step remakes the 16-bit working copy from them.
  void params_changed() { working_fresh_ = false; }
  // Waits for the parameter all-gathers still running (--overlap-param-gather):
  // call before anything outside a training step reads the parameters
  // (evaluation, a checkpoint, export).
  void finish_param_gather();

  // Stage 3: gather the embeddings and final norm. --bf16 / --fp16: remake
  // the working copy if the parameters changed since it was last written
  // (init, load); after an optimizer step it is already current.
  void begin_step();
  void end_step();                         // stage 3: free them again
  void begin_micro_batch(bool last);       // before the micro-batch's forward
  void end_micro_batch();                  // after its backward: reductions finished
  // Reduces every unit not yet reduced this step, then waits for all (a
  // pipelined step, stages 0-1: the gradients of all micro-batches have
  // been accumulated locally).
  void reduce_all();
  // A pipelined step, stages 0-1 with --overlap-grad-reduce: around each
  // Backward of a model chunk. `last`: the chunk's final Backward of the
  // step, after which its layers' gradients are complete, so each layer's
  // reduction starts as its backward ends (Megatron's per-chunk overlap);
  // reduce_all then starts only the units left (embeddings, final norm:
  // the tied table is summed across stages first). Same reductions of the
  // same buffers, in the same order on every dp rank: identical numbers.
  // Under a split backward (DataParallelOptions::split_backward) stages 2-3
  // call these around every weight pass too, whatever the overlap: `last`
  // is the chunk's last weight pass, after which its layers' step-long
  // gradients are reduce-scattered.
  void begin_chunk_backward(bool last);
  void end_chunk_backward();
  // Of the summed gradient of the whole model, the same on every rank.
  // Parameters replicated over tp are counted once (on tp rank 0).
  double grad_norm_squared();
  void optimizer_step(float lr, float grad_scale, int64_t step);
  // Instead of optimizer_step (fp16 overflow): the step's gradients are
  // dropped, the parameters and optimizer state stay as they are.
  void skip_step();

  // LayerHooks
  void before_forward(size_t layer) override;
  void after_forward(size_t layer) override;
  void before_backward(size_t layer) override;
  void after_backward(size_t layer) override;
  void after_backward_input(size_t layer) override;
  void before_backward_weight(size_t layer) override;

  // Persistent model state on this rank (activations 0): what ZeRO divides.
  MemoryBytes memory() const;
  int zero_stage() const { return stage_; }
  const ZeroPartition& partition() const { return part_; }
  AdamW& optimizer() { return *optim_; }

  // What a checkpoint reads and writes (ckpt/zero_shard.h): the model, the
  // dp group, and under ZeRO-3 this rank's parameter shard.
  GPT& model() const { return model_; }
  const comm::Communicator& dp_group() const { return dp_; }
  // The ranks holding this rank's experts (dp_group() without expert parallelism).
  const comm::Communicator& expert_dp_group() const { return *edp_; }
  Buffer& param_shard() { return param_shard_; }            // (shard) stage 3; empty below
  const Buffer& param_shard() const { return param_shard_; }

 private:
  struct Pending {
    comm::Work work;
    Buffer recv;        // (>= q) reduced slice, stages 2-3 (a pooled buffer)
    int64_t recv_n = 0;  // q: the slice's elements
    Buffer unit_grads;  // (>= unit numel) given back to the pool once the reduction is done
    int64_t shard_offset = 0;
    // --grad-reduce-in-bf16: the bf16 gradients being reduced (stage 0: the
    // unit; 1-3: the unit, reduce-scattered in place), and where the reduced
    // part [lowp_at, lowp_at + lowp_n) goes: widened into widen_to (stages
    // 0-1) or added to the gradient shard (2-3).
    std::vector<uint16_t> lowp;  // (unit numel)
    int64_t lowp_at = 0, lowp_n = 0;
    float* widen_to = nullptr;
  };
  void gather_unit(size_t unit);
  void release_unit(size_t unit);
  bool lowp() const { return model_.precision() != Precision::Fp32; }
  // The kernels that touch this engine's buffers: the model's backend,
  // charged to `profile` (null: charged by the caller, or to nothing).
  kernels::Ops ops(Profile* profile) const { return {model_.backend(), profile}; }
  // A 16-bit view of a buffer of the run's low precision.
  kernels::Act lowp_view(uint16_t* p) const { return {p, model_.precision()}; }
  void refresh_working_copy();
  // Stages 1-2, after unit u's parameter all-gather: the working copy of
  // the slices other ranks updated.
  void cast_gathered_slices(size_t unit);
  // Starts a reduction of fp32 gradients g (unit numel) in bf16.
  void start_bf16_reduction(Pending& p, size_t unit, const float* g);
  void start_grad_reduction(size_t unit);
  // Retires finished reductions in issue order, first waiting until at
  // most `keep` are still running (kKeepAll: no waiting).
  static constexpr size_t kKeepAll = ~size_t(0);
  void retire(size_t keep);
  // Stages 2-3: a zeroed gradient buffer of n elements from the pool, and
  // its return (also the reduced slices' buffers, which need no zeroing).
  Buffer take_zeroed_grads(int64_t n);
  void give_back(Buffer&& b);
  // --overlap-param-gather: waits for unit u's parameter all-gather (and,
  // under --bf16/--fp16, remakes the working copy of its other ranks' slices).
  void wait_param_gather(size_t unit);

  GPT& model_;
  comm::Communicator& dp_;
  comm::Communicator* tp_;
  comm::Communicator* pp_;
  DataParallelOptions opt_;
  int stage_;
  comm::Communicator* edp_;  // expert units' group (dp_ without expert parallelism)
  comm::Communicator* ep_;   // null without expert parallelism
  ZeroPartition part_;
  std::unique_ptr<AdamW> optim_;
  // The group a unit is reduced and sharded over: dp x cp, or expert_dp
  // for an MoE layer's expert unit.
  comm::Communicator& group(size_t u) const {
    return model_.layout().units()[u].expert ? *edp_ : dp_;
  }
  // local layer -> its units: the layer's, then an MoE layer's expert unit
  std::vector<std::vector<size_t>> layer_units_;
  std::vector<size_t> root_units_;  // embeddings, final norm
  // Where this rank's gradient norm reads: the owned part of every parameter
  // this rank counts (tp-split ones everywhere, replicated ones on tp rank
  // 0), indexed as the gradient is stored (globally for stages 0-1, by
  // shard offset for stages 2-3).
  struct NormRange {
    int64_t at = 0, n = 0;
    bool expert = false;  // a routed expert stack's (summed over ep under ZeRO-0)
  };
  std::vector<NormRange> norm_ranges_;
  Buffer param_shard_;              // (shard) stage 3
  std::vector<uint16_t> lowp_shard_;  // (shard) stage 3, --bf16 / --fp16: the shard's working copy
  std::vector<std::vector<uint16_t>> gathered_lowp_;  // (unit numel) per unit, stage 3 16-bit, while in use
  bool working_fresh_ = false;      // the working copy matches the parameters
  std::vector<size_t> deferred_reductions_;  // units, stages 0-1 without --overlap-grad-reduce
  // Stages 0-1: per unit, its reduction of this step has started (cleared
  // once every reduction of the step has finished).
  std::vector<char> reduction_started_;
  std::vector<comm::Work> param_gathers_;    // per unit, stages 1-2: the running all-gather
  Buffer grad_shard_;               // (shard) stages 2-3
  std::vector<Buffer> gathered_;    // (>= unit numel) per unit, stage 3, while in use
  // Stage 3's released gather buffers, taken again by the next gathers: a
  // fresh buffer per gather cost its page faults and zeroing every time
  // (about 20 ms a step on default.toml at dp 2, charged to comm). They
  // never outnumber the units gathered at once; the all-gather writes
  // every element it uses, so none is cleared.
  std::vector<Buffer> spare_gathered_;
  std::vector<std::vector<uint16_t>> spare_gathered_lowp_;
  std::vector<Buffer> unit_grads_;  // (>= unit numel) per unit, stages 2-3, while in use
  // Stages 2-3: the released gradient and reduced-slice buffers, taken again
  // by the next units (issue 37). A fresh buffer per unit and micro-batch
  // cost ~4000 page faults a step on the small shape (dp 2: 91-96 k minor
  // faults in 10 steps against ZeRO-1's 52 k, +30 % system time), paid
  // inside backward and the reduction on both ranks. They never outnumber
  // the units in flight at once.
  std::vector<Buffer> spare_grads_;
  std::deque<Pending> pending_;
  bool last_micro_batch_ = true;
};

}  // namespace tessera

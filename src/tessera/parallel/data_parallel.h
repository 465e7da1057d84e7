// DataParallel: data parallelism with ZeRO stages 0-3 over the dp group, as
// LayerHooks the model calls around every layer.
//
//   stage 0  gradients all-reduced; every rank keeps everything.
//   stage 1  AdamW moments sharded: gradients reduce-scattered (in place,
//            into the full gradient buffer), each rank updates its slice of
//            the parameters, then parameters are all-gathered.
//   stage 2  gradients sharded too: no full gradient buffer. Each unit's
//            gradient lives in a buffer only from its backward until its
//            reduce-scatter into the rank's gradient shard has finished.
//   stage 3  parameters sharded too: a layer's parameters are all-gathered
//            just before its forward and again before its backward and
//            freed after each; the embeddings and final norm (the tied head
//            needs them at both ends) are gathered for the whole step.
//
// Shards are ZeroPartition's: slice r of every unit. Reductions are issued
// per unit as soon as backward has finished the unit and run asynchronously
// while backward continues (stages 0-1 on the step's last micro-batch, after
// local accumulation; stages 2-3 on every micro-batch, since there is no full
// buffer to accumulate in). Unit sizes divide by dp, so no buffer is
// truncated: the padding is part of the unit and stays zero.
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

class DataParallel : public LayerHooks {
 public:
  // model must have been built with own_params = (zero_stage < 3) and
  // own_grads = (zero_stage < 2). dp (and tp, the model's tensor-parallel
  // group or null) outlive this object.
  // pp: the pipeline group (null: one stage). The last stage's copy of the
  // tied embedding is left out of the gradient norm (the first stage's counts).
  DataParallel(GPT& model, comm::Communicator& dp, int zero_stage, const AdamWConfig& optim,
               comm::Communicator* tp = nullptr, comm::Communicator* pp = nullptr);
  ~DataParallel() override;

  void init_params(uint64_t seed);

  void begin_step();                       // stage 3: gather the embeddings and final norm
  void end_step();                         // stage 3: free them again
  void begin_micro_batch(bool last);       // before the micro-batch's forward
  void end_micro_batch();                  // after its backward: reductions finished
  // Reduces every unit now (a pipelined step, stages 0-1: the gradients of
  // all micro-batches have been accumulated locally).
  void reduce_all();
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

  // Persistent model state on this rank (activations 0): what ZeRO divides.
  MemoryBytes memory() const;
  int zero_stage() const { return stage_; }
  const ZeroPartition& partition() const { return part_; }
  AdamW& optimizer() { return *optim_; }
  void set_profile(Profile* p) { profile_ = p; }

  // What a checkpoint reads and writes (ckpt/zero_shard.h): the model, the
  // dp group, and under ZeRO-3 this rank's parameter shard.
  GPT& model() const { return model_; }
  const comm::Communicator& dp_group() const { return dp_; }
  Buffer& param_shard() { return param_shard_; }            // (shard) stage 3; empty below
  const Buffer& param_shard() const { return param_shard_; }

 private:
  struct Pending {
    comm::Work work;
    Buffer recv;        // (q) reduced slice, stages 2-3
    Buffer unit_grads;  // (unit numel) freed once the reduction is done
    int64_t shard_offset = 0;
  };
  void gather_unit(size_t unit);
  void release_unit(size_t unit);
  void start_grad_reduction(size_t unit);
  void retire(bool wait_all);

  GPT& model_;
  comm::Communicator& dp_;
  comm::Communicator* tp_;
  comm::Communicator* pp_;
  int stage_;
  ZeroPartition part_;
  std::unique_ptr<AdamW> optim_;
  std::vector<size_t> layer_unit_;  // local layer -> unit index
  std::vector<size_t> root_units_;  // embeddings, final norm
  // Where this rank's gradient norm reads: the owned part of every parameter
  // this rank counts (tp-split ones everywhere, replicated ones on tp rank
  // 0), indexed as the gradient is stored (globally for stages 0-1, by
  // shard offset for stages 2-3).
  std::vector<std::pair<int64_t, int64_t>> norm_ranges_;
  Buffer param_shard_;              // (shard) stage 3
  Buffer grad_shard_;               // (shard) stages 2-3
  std::vector<Buffer> gathered_;    // (unit numel) per unit, stage 3, while in use
  std::vector<Buffer> unit_grads_;  // (unit numel) per unit, stages 2-3, while in use
  std::deque<Pending> pending_;
  bool last_micro_batch_ = true;
  Profile* profile_ = nullptr;
};

}  // namespace tessera

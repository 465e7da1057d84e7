// MemoryBytes: the bytes one rank holds, by kind. One type for every place
// that counts them: what the engine holds (DataParallel::memory, the
// metrics file's "memory_bytes"), what the planner predicts for a pipeline
// stage (plan::StageCost::state) and what `plan --validate` reads back.
//
// zero_state_bytes is the one ZeRO formula (Rajbhandari et al. 2020, §5 and
// Figure 1): stage 1 shards the optimizer state over the dp replicas, 2 also
// the gradients, 3 also the parameters. The engine's fp32 AdamW is
// kFp32AdamBytes per element; the planner passes its precision's bytes.
#pragma once
#include <cstdint>

namespace tessera {

// Doubles: the planner's counts are fractional (a 175B model over dp 7),
// and a rank's byte counts are exact in a double up to 2^53 (9 PB).
struct MemoryBytes {
  double params = 0, grads = 0, optimizer = 0;  // model state: what ZeRO shards
  double activations = 0;                       // in flight at the peak (0: not counted)
  double state() const { return params + grads + optimizer; }
  double total() const { return state() + activations; }
};

// Bytes per parameter of each kind of model state, before ZeRO sharding.
struct StateBytesPerParam {
  double params = 0, grads = 0, optimizer = 0;
};
// fp32 weights (their own master copy), fp32 gradients, Adam's m and v.
inline constexpr StateBytesPerParam kFp32AdamBytes{4, 4, 8};
// The engine under --bf16 / --fp16: fp32 master weights plus their 16-bit
// working copy (4 + 2, sharded together under ZeRO-3), gradients accumulated
// in fp32 (4; also with --grad-reduce-in-bf16, which rounds only what
// travels), Adam's m and v (8). 18 bytes, Megatron's bf16 recipe with fp32
// gradient accumulation; the ZeRO paper's 16 assume 16-bit gradients.
inline constexpr StateBytesPerParam kMixed16AdamBytes{6, 4, 8};

// Model-state bytes of `params` parameters per rank under ZeRO `zero_stage`
// over `dp` replicas (activations 0). A sharded kind is divided by dp, so a
// count dp divides (the engine pads units to it) stays exact.
MemoryBytes zero_state_bytes(double params, StateBytesPerParam per, int zero_stage, int64_t dp);
// Under expert parallelism: `params` dense elements sharded over `dp`
// (dp x cp) replicas and `expert_params` (the rank's E / ep experts:
// ParamLayout::expert_numel) over `expert_dp` (dp x cp / ep), the two added.
MemoryBytes zero_state_bytes(double params, double expert_params, StateBytesPerParam per,
                             int zero_stage, int64_t dp, int64_t expert_dp);

// ZeRO-2/3 under a split backward (zb-h1, zbv: DataParallelOptions::
// split_backward): each unit's gradient is held unsharded from its first
// input pass of the step to its chunk's last weight pass, so through the
// backward half of the step the whole stage's, `params` x per.grads bytes
// beside the shard. 0 for the other stages and schedules.
double split_backward_grad_bytes(double params, StateBytesPerParam per, int zero_stage,
                                 bool split_backward);

}  // namespace tessera

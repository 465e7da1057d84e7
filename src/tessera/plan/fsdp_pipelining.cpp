#include "tessera/plan/fsdp_pipelining.h"

namespace tessera::plan {

namespace {

// The accumulator's element bytes: FSDP2 upcasts a gradient to reduce_dtype
// when that differs from the 16-bit parameter dtype
// (FSDPParam.to_accumulated_grad_if_needed, torch 2.5-2.6
// distributed/_composable/fsdp/_fsdp_param.py), else keeps the .grad it got.
double accumulator_bytes(const PlanLayout& L) { return L.grad_reduce_bytes > 0 ? L.grad_reduce_bytes : 2.0; }

}  // namespace

// Why a whole unsharded gradient: torch.distributed.pipelining's stage
// (_PipelineStageBase.backward_maybe_with_nosync, torch 2.5-2.6
// distributed/pipelining/stage.py) sets set_requires_gradient_sync(False)
// and set_reshard_after_backward(False) on the FSDP module for every
// backward and runs FSDP's post_backward (the reduce-scatter) by hand only
// after the last one. Until then FSDP2 keeps each parameter's gradient
// unsharded, as unsharded_accumulated_grad in reduce_dtype (fp32 in
// torchtitan at 9dec370): 4 bytes a parameter of the stage on top of the
// sharded state ZeRO-2 counts, alive from the first backward to the end of
// the step, so through the activation peak of 1F1B's steady state.
double fsdp2_pipelining_grad_bytes(const PlanLayout& L, double params) {
  if (!L.fsdp2_pipelining) return 0;
  return accumulator_bytes(L) * params;
}

// Per micro-batch, each unit's post-backward hook folds the unit's fresh
// 16-bit gradient into the accumulator: the first micro-batch casts it
// (read 2, write 4 bytes a parameter in fp32), each later one adds it
// (accumulate_unsharded_grad_if_needed: read 2 + 4, write 4). Averaged over
// the step's micro-batches; at the achieved memory bandwidth.
double fsdp2_pipelining_accumulate_seconds(const SystemSpec& sys, const PlanLayout& L, double params) {
  if (!L.fsdp2_pipelining) return 0;
  const double acc = accumulator_bytes(L);
  const double m = double(L.micro_batches());
  const double first = 2.0 + acc, later = 2.0 + 2.0 * acc;
  return (first + later * (m - 1.0)) / m * params / sys.achieved_memory_bandwidth();
}

}  // namespace tessera::plan

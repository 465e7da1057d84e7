// `tessera plan --by-op`: one layout's predicted step, per pipeline stage,
// broken down by what takes the time — GEMMs, attention, the memory-bound
// kernels, each kind of tensor-parallel collective (from the engine's op
// list, model/op_list.h), ZeRO-3 gathers, pipeline bubble, exposed
// data-parallel reduction, embedding sync, waiting at synchronisations and
// the optimizer — and the throughput: model and hardware TFLOP/s per device
// (hardware counts recomputation, the Megatron papers' convention), MFU, HFU.
#pragma once
#include <string>

#include "tessera/plan/layout_cost.h"

namespace tessera::plan {

// Seconds of one optimizer step on a rank of one stage, by part. The parts
// sum to `step` (the layout's step time): every stage waits for the others.
struct StageByOp {
  int64_t stage = 0;
  double gemm = 0, attention = 0, memory_bound = 0;
  double tp_all_reduce = 0, tp_all_gather = 0, tp_reduce_scatter = 0;
  double zero3_gather = 0;
  double bubble = 0;          // idle in the pipeline: its time minus this stage's busy time
  double dp_exposed = 0, embedding_sync = 0, sync_wait = 0;
  double core_sharing = 0;    // waiting for other ranks on this CPU core (layout_cost.h)
  double optimizer = 0;       // AdamW and the gradient norm
  double idle_after = 0;      // waiting for the slowest stage's optimizer / syncs
  double step = 0;
};

struct ByOpReport {
  std::vector<StageByOp> stages;
  double model_tflops = 0, hardware_tflops = 0;  // per device
  double mfu = 0, hfu = 0;
};

// c: evaluate_layout of the layout with every stage (CostOptions default).
ByOpReport by_op(const GPTConfig& m, const SystemSpec& sys, const LayoutCost& c);
std::string format_by_op(const GPTConfig& m, const SystemSpec& sys, const LayoutCost& c);

}  // namespace tessera::plan

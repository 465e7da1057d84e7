// PlanLayout: one candidate the planner evaluates — the engine's
// ParallelConfig (degrees, schedule, batch) plus what only the planner
// varies (precision, flash attention).
#pragma once
#include <string>

#include "tessera/config/parallel_config.h"

namespace tessera::plan {

// Mixed16: fp16/bf16 weights, grads and activations with fp32 master
// weights and Adam moments (Micikevicius et al. 2018). FP32: everything fp32.
enum class Precision { Mixed16, FP32 };

struct PlanLayout {
  ParallelConfig par;
  Precision precision = Precision::Mixed16;
  bool flash_attention = true;
  // Model tessera's own engine (`tessera plan --validate` of a metrics
  // file, calibration) rather than Megatron-LM on GPUs: fp32 master weights
  // and AdamW state in either precision, under --bf16 / --fp16 with the
  // 16-bit working copy beside the master (engine_state_bytes_per_param, as
  // DataParallel::memory counts it), and activations as the engine's arena
  // (activations_bytes, 16-bit GEMM activations for Mixed16) instead of
  // Korthikanti's formula.
  // fp32 layouts always use the arena: the engine is the only fp32 trainer
  // the planner models.
  bool engine = false;
  // Megatron-LM's --overlap-grad-reduce and --overlap-param-gather (both off
  // by default there and in `tessera train`): whether the data-parallel
  // gradient reduction runs behind the last micro-batch's backward, and the
  // ZeRO-1/2 parameter all-gather behind the next step's forward. A run's
  // setting, not the machine's: how much of an overlapped collective the
  // compute hides is the system's comm_overlap.
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;

  int64_t devices() const { return par.tp * par.pp * par.dp; }
  int64_t micro_batches() const { return par.accumulation_steps(); }
  // "tp 4 pp 16 dp 2 mb 1 v 1 zero 1 full sp 1f1b"
  std::string str() const;
};

const char* precision_name(Precision p);
int64_t activation_element_bytes(Precision p);  // 2 for mixed, 4 for fp32

}  // namespace tessera::plan

// PlanLayout: one candidate the planner evaluates — the engine's
// ParallelConfig (degrees, schedule, batch) plus what only the planner
// varies (precision, flash attention).
#pragma once
#include <string>

#include "tessera/config/parallel_config.h"
#include "tessera/kernels/precision.h"

namespace tessera::plan {

// The engine's precisions (--bf16 / --fp16 / neither), one vocabulary for
// train and plan. bf16 and fp16 are mixed precision: 16-bit weights, GEMM
// inputs and activations with fp32 master weights and Adam moments
// (Micikevicius et al. 2018); they differ in what the planner prices:
// - peaks: the system file's `bf16` and `fp16` (equal on A100, H100,
//   MI250X; on a CPU the measured kernels of each, [[gemm.measured_bf16]]
//   and [[gemm.measured_fp16]]);
// - Megatron-LM (a layout not marked `engine`) accumulates and all-reduces
//   bf16 runs' gradients in fp32 (arguments.py forces
//   accumulate_allreduce_grads_in_fp32 for bf16), fp16 runs' in fp16, and
//   scales fp16's loss: each step copies the fp16 gradients into the fp32
//   main gradients and unscales them with an inf/NaN check over the model-
//   parallel group (memory_model.h, layout_cost.cpp);
// - the engine keeps fp32 gradients in both and folds fp16's unscale and
//   overflow check into the gradient norm it computes anyway (trainer.cpp),
//   so only its GEMMs differ.
using tessera::Precision;

struct PlanLayout {
  ParallelConfig par;
  Precision precision = Precision::Bf16;
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
  // `--precision fp8` (planner only; the engine does not train in FP8):
  // Transformer Engine's recipe on top of `precision` (bf16): the
  // transformer layers' linear GEMMs take FP8 inputs at the device's FP8
  // peak, each input cast (with its amax) and transposed by a memory-bound
  // pass, and the weights' FP8 copies (and their transposes) cast once a
  // step beside the bf16 ones; attention, the LM head, the loss and the
  // optimizer stay as in bf16 (layer_ops.cpp, layout_cost.cpp).
  bool fp8 = false;
  // With fp8: torchao's Float8Linear (torchtitan) instead of Transformer
  // Engine (a published run's `fp8-recipe = "torchao"`; torchao eab345c
  // float8/float8_linear.py): no FP8 copy of the weights is kept between
  // steps, each linear casts its weight (read 2, write 1 bytes a parameter)
  // every time it runs forward (a recompute too).
  bool fp8_torchao = false;
  // Megatron-LM's --tp-comm-overlap (planner only; Transformer Engine's
  // userbuffers, which need sequence parallelism): each tensor-parallel
  // all-gather and reduce-scatter of activations is split into tp chunks
  // that move while the GEMM beside it computes on the chunk already there
  // (layer_ops.cpp: tp_overlapped_seconds).
  bool tp_comm_overlap = false;
  // A GPT-family model trained without dropout (a published run's
  // `dropout = false`: llm-foundry's MPT, whose attn_pdrop, resid_pdrop and
  // emb_pdrop default to 0): no dropout mask is stored (a dropout of 0
  // returns its input). Off, a GPT keeps Korthikanti's masks, taken with
  // Megatron-LM's default dropout of 0.1; the Llama family stores them only
  // when its config has dropout (memory_model.h).
  bool gpt_without_dropout = false;
  // Bytes a gradient element takes in the data-parallel reduction (the
  // ZeRO-3 per-micro-batch reduce-scatter, the step's all-reduce or
  // reduce-scatter): 0 = the precision's own (state_bytes_per_param().grads:
  // Megatron-LM's fp32 for bf16, fp16 for fp16). A run sets it where its
  // framework reduces in another dtype: PyTorch FSDP's MixedPrecision
  // reduce_dtype (Composer's 'PURE' mode reduces in bf16, 2; its 'DEFAULT'
  // from 0.16.4 and torchtitan in fp32, 4). Only the traffic changes: FSDP
  // casts the reduced shard back to the fp32 gradient it keeps.
  double grad_reduce_bytes = 0;
  // The optimizer step as eager PyTorch runs it (planner only): AdamW as
  // one element-wise op after another per tensor (Composer's
  // DecoupledAdamW loop; torch.optim.AdamW's foreach path, torchtitan's
  // default) instead of one fused pass, and the gradient clip's scale
  // applied to every gradient whether it clips or not (torch's and FSDP's
  // clip_grad_norm_). Bytes in layout_cost.cpp add_step_kernels.
  bool eager_optimizer = false;
  // The Llama family's element-wise code run op by op as eager PyTorch
  // (torchtitan without torch.compile; planner only): RMSNorm, RoPE and
  // SwiGLU at the bytes eager_kernels.h counts instead of one fused pass each.
  bool eager_elementwise = false;
  // PyTorch FSDP1's FlatParameter (planner only; ZeRO-3 as a GPU framework
  // runs it): each unit's gradient passes besides the reduce-scatter, every
  // micro-batch (layout_cost.cpp chunk_work).
  bool fsdp1_flat_grads = false;
  // With selective recompute: torchtitan's op-level policy (op_sac.h)
  // instead of Megatron's attention-core recompute (planner only).
  bool torchtitan_op_sac = false;
  // FSDP2 (ZeRO-2/3 over dp) under torch.distributed.pipelining (planner
  // only; torchtitan's PP + FSDP): gradients accumulate unsharded in the
  // reduce dtype across the step's micro-batches and are reduce-scattered
  // once, after the last backward (fsdp_pipelining.h).
  bool fsdp2_pipelining = false;
  // Attention by FlashAttention in Triton instead of the system file's
  // flash kernel (planner only; llm-foundry's `attn_impl: triton`): each
  // pass at SystemSpec::triton_attention_factor of its rate.
  bool triton_attention = false;
  // A mixture-of-experts run's measured load imbalance (max / mean tokens
  // per expert, `plan --validate` from its metrics; 1: balanced): the
  // slowest expert-parallel rank's share of the expert GEMMs (moe_cost.h).
  double moe_imbalance = 1.0;

  int64_t devices() const { return par.world(); }  // tp x cp x pp x dp
  int64_t micro_batches() const { return par.accumulation_steps(); }
  // "tp 4 pp 16 dp 2 mb 1 v 1 zero 1 full sp 1f1b" (" cp 2" after tp with context parallelism)
  std::string str() const;
};

int64_t activation_element_bytes(Precision p);  // 2 for bf16 / fp16, 4 for fp32

}  // namespace tessera::plan

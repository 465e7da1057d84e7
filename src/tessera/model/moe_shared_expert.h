// The shared expert of an MoE layer (Megatron-LM's
// --moe-shared-expert-intermediate-size S, Qwen-MoE / DeepSeek; docs/moe.md):
// one dense MLP of width S that every token runs beside the routed
// experts, its output added to theirs. Under --moe-shared-expert-gate
// (Qwen2-MoE) it is first scaled per token by a sigmoid gate:
//
//   sh_h   (N, Sf) = ln2 @ shared_fc^T + b         matmul
//   sh_act (N, S)  = GELU(sh_h) or SwiGLU(sh_h)
//   sh_y   (N, C)  = sh_act @ shared_proj^T + b    matmul, fp32
//   gate   (N)     = sigmoid(ln2 @ w_gate^T)       matmul (N, C) x (C, 1), gate only
//   out    (N, C) += gate * sh_y  (or += sh_y)     moe_shared_gate / accumulate
//
// Dense GEMMs and the dense MLP's activation kernels, so the op trace and
// the planner price it as a dense MLP of width S. Its parameters are dense
// ones (ParamLayout "mlp.shared_expert.*"): under expert parallelism every
// rank holds and runs it on its own micro-batch, and its gradient is
// reduced over the data-parallel group like any dense parameter.
#pragma once
#include "tessera/kernels/ops.h"
#include "tessera/model/activations.h"
#include "tessera/model/tensor_parallel.h"
#include "tessera/model/weights.h"

namespace tessera {

// Forward in two halves, so that the routed experts' combine may write
// out over ln2 (under sequence parallelism both live in the gathered rows'
// buffer): the input half reads ln2 (the fc GEMM, the gate's logits), the
// output half adds the shared expert's output to out (N, C) (which the
// routed experts' combine has written). Fills m's sh_* views.
void moe_shared_forward_input(const kernels::Ops& ops, const LayerWeights& w, const MoeActs& m,
                              kernels::ConstAct ln2, const ActShape& s);
void moe_shared_forward_output(const kernels::Ops& ops, const LayerWeights& w, const MoeActs& m,
                               float* out, const ActShape& s);

// Backward in two halves around the routed experts' backward, because
// dout may live in the buffer dln2 is written to (the block's dropout
// copy): first everything that reads dout (the gate and the proj GEMM,
// into the scratch moe_sh_dact / moe_sh_dgate), then, once the routed
// backward has written dln2, the activation and the fc GEMM adding their
// share to it. The gradients into g (written when !add_dw).
//
// Under tensor parallelism (tp active) the expert is split as the dense
// MLP (fc by columns, proj by rows, S the rank's width): out and dln2 are
// this rank's partial sums, which the block sums over tp; the gate's
// logit gradient is summed over tp here, and its share of dln2 added by
// tp rank 0 alone.
void moe_shared_backward_output(const kernels::Ops& ops, const LayerWeights& w,
                                const LayerWeights& g, const MoeActs& m, const float* dout,
                                const Activations& scratch, const ActShape& s,
                                const TensorParallel& tp, bool add_dw);
void moe_shared_backward_input(const kernels::Ops& ops, const LayerWeights& w,
                               const LayerWeights& g, const MoeActs& m, kernels::ConstAct ln2,
                               float* dln2, const Activations& scratch, const ActShape& s,
                               const TensorParallel& tp, bool add_dw);

}  // namespace tessera

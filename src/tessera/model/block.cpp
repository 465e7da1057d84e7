#include "tessera/model/block.h"

#include "tessera/model/expert_parallel.h"
#include "tessera/model/moe_layer.h"
#include "tessera/model/moe_shared_expert.h"

namespace tessera {

void norm_forward(const kernels::Ops& ops, kernels::Act out, float* mean, float* rstd,
                         const float* x, const float* w, const float* b, int64_t rows,
                         const ActShape& s) {
  if (s.rmsnorm)
    ops.rmsnorm_forward(out, rstd, x, w, rows, s.C, s.norm_epsilon);
  else
    ops.layernorm_forward(out, mean, rstd, x, w, b, rows, s.C);
}

void norm_backward(const kernels::Ops& ops, float* dx, float* dw, float* db,
                          const float* dout, const float* x, const float* w, const float* mean,
                          const float* rstd, int64_t rows, const ActShape& s) {
  if (s.rmsnorm)
    ops.rmsnorm_backward(dx, dw, dout, x, w, rstd, rows, s.C);
  else
    ops.layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, rows, s.C);
}

// res (rows, C) += addend, then the norm of the sum into out: LayerNorm
// takes the add into its own pass over the rows (the same bits as add then
// norm); RMSNorm runs the two.
static void residual_norm_forward(const kernels::Ops& ops, kernels::Act out, float* mean,
                                  float* rstd, float* res, const float* addend, const float* w,
                                  const float* b, int64_t rows, const ActShape& s) {
  if (s.rmsnorm) {
    ops.accumulate(res, addend, rows * s.C);
    ops.rmsnorm_forward(out, rstd, res, w, rows, s.C, s.norm_epsilon);
  } else {
    ops.residual_layernorm_forward(out, mean, rstd, res, addend, w, b, rows, s.C);
  }
}

// The attention core, atty and lse from qkv: the cp ring when the
// sequence is split over context-parallel ranks, else the one kernel.
static void attention_core_forward(const kernels::Ops& ops, LayerActs& a, const ActShape& s,
                                   const LayerDropout& drop) {
  if (drop.cp)
    drop.cp->attention_forward(ops, a.atty, a.lse, a.qkv, s.B, s.heads(), &drop.probs);
  else
    ops.attention_forward(a.atty, a.lse, a.qkv, s.B, s.T, s.heads(), &drop.probs);
}

// A hidden dropout of x (Ns, C), forward or backward (the same mask):
// rows keyed by their global positions (under cp, chunk by chunk).
static void hidden_dropout(const kernels::Ops& ops, float* x, const ActShape& s,
                           const LayerDropout& drop, const DropoutSite& site) {
  if (drop.cp)
    cp_dropout_rows(ops, *drop.cp, x, s.Ns(), s.C, drop.row0, s.T, site);
  else
    ops.dropout_rows(x, s.Ns(), s.C, drop.row0, s.T, site);
}

// The MLP's activation: fch_gelu (N, F) = GELU(fch (N, F)), or under SwiGLU
// silu(gate) * up from fch (N, 2F) = [gate | up].
static void mlp_activation_forward(const kernels::Ops& ops, kernels::Act out,
                                   kernels::ConstAct fch, const ActShape& s) {
  if (s.swiglu)
    ops.swiglu_forward(out, fch, s.N(), s.F);
  else
    ops.gelu_forward(out, fch, s.N() * s.F);
}

// A row-parallel linear: out (Ns, C) = leave(inp (N, K) @ weight (C, K)^T) + bias.
// Each rank's product is partial, so the bias is added once, after the sum.
static void row_parallel_forward(const kernels::Ops& ops, float* out, kernels::ConstAct inp,
                                 const float* weight, const float* bias, int64_t N, int64_t Ns,
                                 int64_t K, int64_t C, const TensorParallel& tp, float* tp_full) {
  if (!tp.active()) {
    ops.matmul_forward(out, inp, weight, bias, N, K, C);
    return;
  }
  float* partial = tp.sp() ? tp_full : out;  // (N, C)
  ops.matmul_forward(partial, inp, weight, nullptr, N, K, C);
  tp_leave_forward(tp, partial, out, N, C, ops.profile());
  if (bias) ops.bias_add(out, bias, Ns, C);  // null under --disable-bias-linear
}

void block_forward(const kernels::Ops& ops, const LayerWeights& w, LayerActs& a, const float* x,
                   const ActShape& s, const TensorParallel& tp, float* tp_full,
                   const LayerDropout& drop) {
  const int64_t N = s.N(), Ns = s.Ns();
  Profile* prof = ops.profile();  // the tp helpers charge their communication here
  norm_forward(ops, a.ln1, a.ln1_mean, a.ln1_rstd, x, w.ln1_w, w.ln1_b, Ns, s);
  const kernels::ConstAct ln1 = tp_enter_forward(tp, a.ln1, tp_full, N, s.C, prof);  // (N, C)
  ops.matmul_forward(a.qkv, ln1, w.qkv_w, w.qkv_b, N, s.C, s.Cqkv());
  // GQA and RoPE happen inside (s.heads()): qkv stays unrotated.
  attention_core_forward(ops, a, s, drop);
  row_parallel_forward(ops, a.res_mid, a.atty, w.proj_w, w.proj_b, N, Ns, s.Cl, s.C, tp, tp_full);
  hidden_dropout(ops, a.res_mid, s, drop, drop.attn_out);
  // res_mid += x (the residual), then ln2 of it
  residual_norm_forward(ops, a.ln2, a.ln2_mean, a.ln2_rstd, a.res_mid, x, w.ln2_w, w.ln2_b, Ns,
                        s);
  const kernels::ConstAct ln2 = tp_enter_forward(tp, a.ln2, tp_full, N, s.C, prof);  // (N, C)
  if (w.moe()) {
    // The experts in place of the MLP (and the shared expert, if any).
    // Under tp each rank holds a slice of every expert's width, so its
    // output is partial, reduced as the dense MLP's row-parallel proj's;
    // under SP into tp_full first, over the gathered ln2 the layer has
    // finished reading (moe_mlp_forward).
    float* partial = tp.sp() ? tp_full : a.res_out;  // (N, C)
    moe_mlp_forward(ops, w, a.moe, a.ep_moe, tp, ln2, partial, s);
    if (tp.active()) tp_leave_forward(tp, partial, a.res_out, N, s.C, prof);
  } else if (!a.fch.lowp() && !s.swiglu && w.fc_b) {
    // fp32 GELU: the fc bias is added in the activation's pass (the same
    // bits as the GEMM's own bias pass, one sweep of fch less). Under
    // --bf16 / --fp16 the GEMM adds it before its single rounding.
    ops.matmul_forward(a.fch, ln2, w.fc_w, nullptr, N, s.C, s.Ff());
    ops.bias_gelu_forward(a.fch_gelu.f32(), a.fch.f32(), w.fc_b, N, s.F);
  } else {
    ops.matmul_forward(a.fch, ln2, w.fc_w, w.fc_b, N, s.C, s.Ff());
    mlp_activation_forward(ops, a.fch_gelu, a.fch, s);
  }
  if (!w.moe())
    row_parallel_forward(ops, a.res_out, a.fch_gelu, w.fcproj_w, w.fcproj_b, N, Ns, s.F, s.C, tp,
                         tp_full);
  hidden_dropout(ops, a.res_out, s, drop, drop.mlp_out);
  ops.accumulate(a.res_out, a.res_mid, Ns * s.C);  // the residual
}

void block_recompute(const kernels::Ops& ops, const LayerWeights& w, LayerActs& a,
                     const float* x, const ActShape& s, const TensorParallel& tp,
                     float* tp_full, const LayerDropout& drop) {
  switch (s.recompute) {
    case Recompute::None: return;
    case Recompute::Selective:
      // The same kernels on the same saved inputs as forward: bit-identical.
      attention_core_forward(ops, a, s, drop);
      if (!w.moe()) mlp_activation_forward(ops, a.fch_gelu, a.fch, s);  // MoE keeps its own
      return;
    case Recompute::Full: block_forward(ops, w, a, x, s, tp, tp_full, drop); return;
  }
}

// dL/d(a branch's output) from dresid (Ns, C) = dL/d(the residual sum):
// the add passes dresid on unchanged, and the branch's dropout multiplies it
// by the same mask as in forward. Without dropout that is dresid itself;
// with it, a masked copy in `buf` (Ns, C) — scratch that is free until the
// branch's first GEMM has read it (dln, or tp_full under SP, where dln
// receives the all-gather of this copy).
static const float* branch_grad(const kernels::Ops& ops, const float* dresid, float* buf,
                                const ActShape& s, const LayerDropout& drop,
                                const DropoutSite& site) {
  if (!site.active()) return dresid;
  ops.copy(buf, dresid, s.Ns() * s.C, Op::Dropout);
  hidden_dropout(ops, buf, s, drop, site);
  return buf;
}

// The stash's four views, in a fixed order; with a null base only the
// offsets move (layer_grad_stash_bytes).
static LayerGradStash stash_views(const ActShape& s, char* base, int64_t& bytes) {
  const int64_t elt = s.lowp() ? 2 : 4;
  auto take = [&](int64_t n) {
    char* p = base ? base + bytes : nullptr;
    bytes += (elt * n + 63) / 64 * 64;
    if (!s.lowp()) return kernels::Act(reinterpret_cast<float*>(p));
    return kernels::Act(reinterpret_cast<uint16_t*>(p), s.precision);
  };
  LayerGradStash st;
  st.dqkv = take(s.N() * s.Cqkv());
  st.dproj = take(s.N() * s.C);
  st.dfch = take(s.N() * s.Ff());
  st.dfcproj = take(s.N() * s.C);
  return st;
}

int64_t layer_grad_stash_bytes(const ActShape& s) {
  int64_t bytes = 0;
  stash_views(s, nullptr, bytes);
  return bytes;
}

LayerGradStash layer_grad_stash_place(const ActShape& s, char* base) {
  int64_t bytes = 0;
  return stash_views(s, base, bytes);
}

void block_backward(const kernels::Ops& ops, const LayerWeights& w, const LayerWeights& g,
                    const LayerActs& a, const float* x, float* dresid,
                    const Activations& scratch, const ActShape& s, const TensorParallel& tp,
                    float* ln_grads, const LayerDropout& drop, const LayerGradStash* stash) {
  const int64_t N = s.N(), Ns = s.Ns(), C = s.C;
  Profile* prof = ops.profile();  // the tp helpers charge their communication here
  // Under SP each rank's LayerNorm gradients cover only its rows: collect
  // this micro-batch's share apart, sum it over tp, then accumulate.
  // ln_grads: (2 * per_norm, C) = [ln1 w | ln1 b | ln2 w | ln2 b] for
  // LayerNorm, [ln1 w | ln2 w] for RMSNorm (no bias: half the sum).
  const int64_t per_norm = s.rmsnorm ? 1 : 2;
  LayerWeights gl = g;
  if (tp.sp()) {
    ops.fill(ln_grads, 0.0f, 2 * per_norm * C, Op::LayerNorm);
    gl.ln1_w = ln_grads;                                        // (C)
    gl.ln1_b = s.rmsnorm ? nullptr : ln_grads + C;              // (C) LayerNorm only
    gl.ln2_w = ln_grads + per_norm * C;                         // (C)
    gl.ln2_b = s.rmsnorm ? nullptr : ln_grads + 3 * C;          // (C) LayerNorm only
  }
  // The step's first backward writes the weight gradients (they hold zeros).
  const bool add_dw = !scratch.first_backward_of_step;
  // One linear's backward from dy (N, OC): dinp (N, Cin), and dW, db now,
  // or under a split backward later, from `kept`, the stash's dY (dy is
  // cast into it unless it is already there, rounding as matmul_backward's
  // own cast of an fp32 dY would; the input gradient reads it too). inp is
  // then not read: the column-parallel ones pass their un-gathered shard.
  auto linear = [&](float* dinp, float* dweight, float* dbias, kernels::ConstAct dy,
                    kernels::ConstAct inp, const float* weight, int64_t Cin, int64_t OC,
                    kernels::Act kept) {
    if (!stash) {
      ops.matmul_backward(dinp, dweight, dbias, dy, inp, weight, N, Cin, OC, false, add_dw);
      return;
    }
    if (kept.p != dy.p) ops.cast(kept, dy, N * OC);
    ops.matmul_backward(dinp, nullptr, nullptr, kept, inp, weight, N, Cin, OC, false);
  };
  // The residual passes dresid straight through; each branch adds its part
  // (layernorm_backward accumulates into dresid).
  // MLP branch. The row-parallel bias gradient is taken from the full dY
  // (all rows, after the gather), so it is complete and equal on every rank.
  float* masked = tp.sp() ? scratch.tp_full : scratch.dln;  // (Ns, C) see branch_grad
  const float* dy =
      tp_leave_backward(tp, branch_grad(ops, dresid, masked, s, drop, drop.mlp_out), scratch.dln,
                        N, C, prof);  // (N, C)
  if (w.moe()) {
    // zb-h1 is refused with MoE (train/train_config.cpp): no stash here.
    // (N, C): re-gathered under SP (only the shard was kept) into tp_full,
    // whose masked copy tp_leave_backward has consumed.
    const kernels::ConstAct ln2 = tp_enter_forward(tp, a.ln2, scratch.tp_full, N, C, prof);
    // The shared expert's half that reads dy first: dy may be scratch.dln
    // (the dropout's copy), which the routed backward overwrites.
    if (s.S > 0) moe_shared_backward_output(ops, w, g, a.moe, dy, scratch, s, tp, add_dw);
    if (a.ep_moe.ep)  // w and g hold this rank's E / ep experts (ParamLayout)
      moe_backward_ep(ops, w, g, a.moe, a.ep_moe, ln2, dy, scratch.dln, scratch, s, add_dw, tp);
    else
      moe_backward(ops, w, g, a.moe, ln2, dy, scratch.dln, scratch, s, add_dw, tp);
    if (s.S > 0)
      moe_shared_backward_input(ops, w, g, a.moe, ln2, scratch.dln, scratch, s, tp, add_dw);
  } else {
    // (N, F) dL/d fch_gelu: in dfch for GELU (which then works in place),
    // in dact for SwiGLU (its input gradient is twice as wide).
    float* dact = s.swiglu ? scratch.dact : scratch.dfch;
    linear(dact, g.fcproj_w, g.fcproj_b, dy, a.fch_gelu, w.fcproj_w, s.F, C,
           stash ? stash->dfcproj : kernels::Act());
    // (N, Ff): fp32 in dfch; in the GEMM precision under --bf16 / --fp16;
    // written straight into the stash under a split backward
    const kernels::Act dfch = stash ? stash->dfch : ops.grad_operand(scratch.dfch, N * s.Ff());
    if (s.swiglu)
      ops.swiglu_backward(dfch, a.fch, dact, N, s.F);
    else
      ops.gelu_backward(dfch, a.fch, dact, N * s.F);
    // (N, C): re-gathered under SP, only the shard was kept (the split
    // backward's weight pass gathers it instead)
    const kernels::ConstAct ln2 =
        stash ? a.ln2 : tp_enter_forward(tp, a.ln2, scratch.tp_full, N, C, prof);
    linear(scratch.dln, g.fc_w, g.fc_b, dfch, ln2, w.fc_w, C, s.Ff(), dfch);
  }
  const float* dln2 = tp_enter_backward(tp, scratch.dln, N, C, prof);  // (Ns, C)
  norm_backward(ops, dresid, gl.ln2_w, gl.ln2_b, dln2, a.res_mid, w.ln2_w, a.ln2_mean,
                a.ln2_rstd, Ns, s);
  // Attention branch.
  dy = tp_leave_backward(tp, branch_grad(ops, dresid, masked, s, drop, drop.attn_out),
                         scratch.dln, N, C, prof);
  linear(scratch.datty, g.proj_w, g.proj_b, dy, a.atty, w.proj_w, s.Cl, C,
         stash ? stash->dproj : kernels::Act());
  // (N, Cqkv): fp32, or in the GEMM precision under --bf16 / --fp16 (the stash's, split)
  const kernels::Act dqkv = stash ? stash->dqkv : ops.grad_operand(scratch.dqkv, N * s.Cqkv());
  if (drop.cp)
    drop.cp->attention_backward(ops, dqkv, scratch.datty, a.qkv, a.atty, a.lse, s.B, s.heads(),
                                &drop.probs);
  else
    ops.attention_backward(dqkv, scratch.datty, a.qkv, a.atty, a.lse, s.B, s.T, s.heads(),
                           &drop.probs);
  const kernels::ConstAct ln1 =
      stash ? a.ln1 : tp_enter_forward(tp, a.ln1, scratch.tp_full, N, C, prof);  // (N, C)
  linear(scratch.dln, g.qkv_w, g.qkv_b, dqkv, ln1, w.qkv_w, C, s.Cqkv(), dqkv);
  const float* dln1 = tp_enter_backward(tp, scratch.dln, N, C, prof);  // (Ns, C)
  norm_backward(ops, dresid, gl.ln1_w, gl.ln1_b, dln1, x, w.ln1_w, a.ln1_mean, a.ln1_rstd, Ns,
                s);
  if (tp.sp()) {
    tp_sum_region_grad(tp, ln_grads, 2 * per_norm * C, prof);
    ops.accumulate(g.ln1_w, gl.ln1_w, C);
    if (!s.rmsnorm) ops.accumulate(g.ln1_b, gl.ln1_b, C);
    ops.accumulate(g.ln2_w, gl.ln2_w, C);
    if (!s.rmsnorm) ops.accumulate(g.ln2_b, gl.ln2_b, C);
  }
}

void block_backward_weight(const kernels::Ops& ops, const LayerWeights& w, const LayerWeights& g,
                           const LayerActs& a, const LayerGradStash& stash,
                           const Activations& scratch, const ActShape& s,
                           const TensorParallel& tp, bool first) {
  const int64_t N = s.N(), C = s.C;
  Profile* prof = ops.profile();  // the tp helpers charge their communication here
  const bool add_dw = !first;
  // block_backward's four weight GEMMs in its order, each with its bias
  // (the same sums into g as the combined backward's, only later).
  ops.matmul_backward(nullptr, g.fcproj_w, g.fcproj_b, stash.dfcproj, a.fch_gelu, w.fcproj_w, N,
                      s.F, C, false, add_dw);
  const kernels::ConstAct ln2 = tp_enter_forward(tp, a.ln2, scratch.tp_full, N, C, prof);  // (N, C)
  ops.matmul_backward(nullptr, g.fc_w, g.fc_b, stash.dfch, ln2, w.fc_w, N, C, s.Ff(), false,
                      add_dw);
  ops.matmul_backward(nullptr, g.proj_w, g.proj_b, stash.dproj, a.atty, w.proj_w, N, s.Cl, C,
                      false, add_dw);
  const kernels::ConstAct ln1 = tp_enter_forward(tp, a.ln1, scratch.tp_full, N, C, prof);  // (N, C)
  ops.matmul_backward(nullptr, g.qkv_w, g.qkv_b, stash.dqkv, ln1, w.qkv_w, N, C, s.Cqkv(), false,
                      add_dw);
}

}  // namespace tessera

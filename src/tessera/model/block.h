// One transformer block (pre-LayerNorm GPT-2), forward and backward, written
// out op by op:
//   res_mid = x + proj(attention(qkv(ln_1(x))))
//   res_out = res_mid + fcproj(gelu(fc(ln_2(res_mid))))
// The Llama family (ActShape's switches) swaps the parts in place: RMSNorm
// for ln_1 / ln_2, silu(gate) * up for gelu (fc writes [gate | up]),
// attention over GQA heads with RoPE applied inside the kernel (qkv rows
// [q NH | k KVH | v KVH] heads), and no biases under --disable-bias-linear.
// Under tensor parallelism qkv and fc are column-parallel, proj and fcproj
// row-parallel, each pair wrapped in tensor_parallel.h's enter / leave.
//
// Activation recomputation (--recompute-granularity none|selective|full):
// what forward keeps for backward, and what backward computes again.
//
//   none       every layer keeps all of its views (activations.h).
//   selective  every layer keeps the linears' inputs and outputs that are
//              not cheap to rebuild: ln1 (+ stats), qkv, res_mid, ln2
//              (+ stats), fch, res_out. It drops the attention core's
//              output atty and its row log-sum-exp lse, and the GELU output
//              fch_gelu; backward recomputes attention_forward(qkv) and
//              gelu(fch) into one shared layer's scratch. Our attention is
//              flash-style (no T x T matrix is ever stored), so unlike
//              Megatron's selective there are no scores to drop: the saving
//              is atty + lse + fch_gelu = B*T*(Cl + F) + B*NH*T floats per
//              layer, for the attention forward's 4*T^2*C FLOPs per sequence
//              per layer (what flops.cpp counts) plus an elementwise GELU.
//   full       every layer keeps only its output res_out (the next layer's
//              input; the first layer's input is `encoded`), so a stage
//              holds (L + 1) * Ns * C floats of layer state; backward reruns
//              the whole block_forward of a layer into one shared layer's
//              scratch, then its backward (flops.cpp: one more forward).
//
// The mode travels in ActShape::recompute (GPT::act_shape fills it from
// GPTOptions::recompute); activations_bytes reports each mode's true size.
// recompute_parse (config/parallel_config.h) reads the flag.
#pragma once
#include "tessera/kernels/dropout_site.h"
#include "tessera/kernels/ops.h"
#include "tessera/model/activations.h"
#include "tessera/model/context_parallel.h"
#include "tessera/model/tensor_parallel.h"
#include "tessera/model/weights.h"

namespace tessera {

// The dropouts of one layer for one micro-batch (kernels/dropout_site.h);
// every site inactive (p = 0) when not training. Hidden dropout applies to
// the attention and MLP outputs before their residual adds (Megatron's
// bias-dropout-add); row0 is the global row of this rank's first
// sequence-parallel region row (tp rank * Ns under SP, else 0).
struct LayerDropout {
  DropoutSite probs;     // attention probabilities; head0 = this tp rank's first head
  DropoutSite attn_out;  // (Ns, C) attention block output
  DropoutSite mlp_out;   // (Ns, C) MLP block output
  int64_t row0 = 0;
  // Context parallelism (null: none): the block's rows are this rank's
  // T / cp of each sequence (under SP, region rows from row0 among those
  // B x T / cp rows; qkv and atty hold all of them); attention runs the cp
  // ring, and the hidden dropouts key each row by its global position
  // (context_parallel.h).
  const ContextParallel* cp = nullptr;
};

// The block's norm, LayerNorm or RMSNorm (s.rmsnorm, the Llama family):
// out (rows, C) from x (rows, C), mean (rows; null under RMSNorm, which
// keeps rstd only and has no bias b), rstd (rows). The final norm uses it too.
void norm_forward(const kernels::Ops& ops, kernels::Act out, float* mean, float* rstd,
                  const float* x, const float* w, const float* b, int64_t rows,
                  const ActShape& s);
// dx (rows, C) += the norm's input gradient; dw (C) += and db (C) += (LayerNorm only).
void norm_backward(const kernels::Ops& ops, float* dx, float* dw, float* db, const float* dout,
                   const float* x, const float* w, const float* mean, const float* rstd,
                   int64_t rows, const ActShape& s);

// Every kernel runs through `ops` (kernels/ops.h: the backend, and the
// profile each call charges its time to; the tp helpers charge theirs to
// the same profile).

// x (Ns, C) -> a.res_out (Ns, C); fills every saved view of `a`. tp_full
// (B, T, C) is scratch for sequence parallelism (null without it).
void block_forward(const kernels::Ops& ops, const LayerWeights& w, LayerActs& a, const float* x,
                   const ActShape& s, const TensorParallel& tp, float* tp_full,
                   const LayerDropout& drop);

// Before block_backward under recomputation (s.recompute, see ActShape):
// refill the views of `a` that forward did not keep. Selective reruns the
// attention core (atty, lse from qkv) and GELU (fch_gelu from fch); full
// reruns block_forward from the layer input x, collectives included (every
// tp rank recomputes together), rewriting a.res_out with the same values.
// Nothing to do without recomputation.
// The masks are drawn again from the same sites (never stored), so the
// recomputation is bit-identical to the forward.
void block_recompute(const kernels::Ops& ops, const LayerWeights& w, LayerActs& a,
                     const float* x, const ActShape& s, const TensorParallel& tp,
                     float* tp_full, const LayerDropout& drop);

// The split backward of the zero-bubble schedules (parallel/schedule.h:
// BackwardInput, BackwardWeight): what a layer's input pass keeps for its
// weight pass, the output gradient dY of each of its four GEMMs, stored in
// the GEMMs' precision (ActShape::precision) as the combined backward feeds
// them to matmul_backward, so both passes see the same bits. The GEMMs'
// inputs (ln1, atty, ln2, fch_gelu) are the layer's saved activations.
struct LayerGradStash {
  kernels::Act dqkv;    // (N, Cqkv) dL/d qkv
  kernels::Act dproj;   // (N, C) dL/d proj output (after dropout's mask; gathered under SP)
  kernels::Act dfch;    // (N, Ff) dL/d fch
  kernels::Act dfcproj; // (N, C) dL/d fcproj output (likewise)
};
// Bytes of one layer's stash (each view rounded up to 64 bytes, as
// activations_bytes rounds its views), and its views laid out from `base`.
int64_t layer_grad_stash_bytes(const ActShape& s);
LayerGradStash layer_grad_stash_place(const ActShape& s, char* base);

// Given dresid (Ns, C) = dL/d res_out, accumulates parameter gradients into
// g and turns dresid into dL/d x in place. `scratch` supplies dln, dqkv,
// datty, dfch and tp_full. Under sequence parallelism ln_grads (4*C) is
// scratch for this micro-batch's LayerNorm gradients before their tp sum.
// With `stash` (the input pass of a split backward) the four GEMMs' weight
// and bias gradients are not computed: their dY go to the stash for
// block_backward_weight; the norms' gradients are still accumulated here.
void block_backward(const kernels::Ops& ops, const LayerWeights& w, const LayerWeights& g,
                    const LayerActs& a, const float* x, float* dresid,
                    const Activations& scratch, const ActShape& s, const TensorParallel& tp,
                    float* ln_grads, const LayerDropout& drop,
                    const LayerGradStash* stash = nullptr);

// The weight pass of a split backward: the four GEMMs' weight and bias
// gradients into g from the stash block_backward filled and the layer's
// saved inputs (ln1 and ln2 re-gathered over tp under SP, into
// scratch.tp_full: every tp rank runs it together). first: the step's first
// weight pass of the layer, which writes the weight gradients (they hold
// zeros) instead of adding to them, as first_backward_of_step does. w: the
// weights, for the working copy's lookup only (not read).
void block_backward_weight(const kernels::Ops& ops, const LayerWeights& w, const LayerWeights& g,
                           const LayerActs& a, const LayerGradStash& stash,
                           const Activations& scratch, const ActShape& s,
                           const TensorParallel& tp, bool first);

}  // namespace tessera

// kernels::Ops: what the engine calls (the model, the optimizer, the
// data-parallel engine). A small non-virtual facade over a Backend that
// charges each call's time to the step's Profile under the op's kind
// (Op::Gemm, Op::LayerNorm, ...), so the call lists stay flat —
// `ops.matmul_forward(out, inp, w, b, N, C, OC);` — with the timing part of
// the call rather than wrapped around it. A null profile costs one branch
// per call.
//
// Under --bf16 / --fp16 it also does what the model should not have to:
// casts an fp32 GEMM operand into a 16-bit scratch, finds a weight's
// working copy, and hands out 16-bit views for gradients that only feed a
// GEMM. Arguments and shapes are the Backend's (backend.h).
#pragma once
#include <cstdint>

#include "tessera/core/error.h"
#include "tessera/core/profile.h"
#include "tessera/kernels/backend.h"
#include "tessera/kernels/precision.h"

namespace tessera::kernels {

class Ops {
 public:
  // lowp: the model's low-precision state under --bf16 / --fp16 (null or
  // inactive: fp32, every activation an fp32 view).
  Ops(const Backend& backend, Profile* profile, const LowPrecision* lowp = nullptr)
      : b_(&backend), prof_(profile), lp_(lowp && lowp->active() ? lowp : nullptr) {}

  const Backend& backend() const { return *b_; }
  // The profile the calls are charged to (null: not profiling); the model's
  // communication helpers charge theirs to the same one.
  Profile* profile() const { return prof_; }

  // Activations (Act, ConstAct: precision.h) are fp32 views or, under
  // --bf16 / --fp16, views of the run's 16-bit type; a 16-bit activation
  // of another type, or without the low-precision state, is refused.

  // ---- Op::Gemm (under --bf16 / --fp16 the operands' casts: Op::Cast) ----
  // Low precision: an fp32 inp (and dout) is cast into the scratch, a
  // 16-bit one is used as it is; the weight is read from the working copy.
  // out is written in its view's precision; the gradients stay fp32.
  void matmul_forward(Act out, ConstAct inp, const float* weight, const float* bias, int64_t N,
                      int64_t C, int64_t OC) const {
    expect_run_type(out), expect_run_type(inp);
    if (lp_) {
      const ConstAct x = lowp_operand(0, inp, N * C);
      const ConstAct w = weight_of(weight, OC * C);
      ProfileScope t(prof_, Op::Gemm);
      b_->matmul_forward(out, x, w, bias, N, C, OC);
      return;
    }
    ProfileScope t(prof_, Op::Gemm);
    b_->matmul_forward(out, inp, weight, bias, N, C, OC);
  }
  // dout: fp32 (cast into the scratch here), or a 16-bit view its producer
  // wrote (grad_operand) and used as it is. accumulate_dweight false: dweight
  // holds zeros (the step's first backward), written instead of added to.
  void matmul_backward(float* dinp, float* dweight, float* dbias, ConstAct dout,
                       ConstAct inp, const float* weight, int64_t N, int64_t C, int64_t OC,
                       bool accumulate_dinp = false, bool accumulate_dweight = true) const {
    expect_run_type(dout), expect_run_type(inp);
    if (lp_) {
      const ConstAct x = lowp_operand(0, inp, N * C);
      const ConstAct dy = lowp_operand(1, dout, N * OC);
      const ConstAct w = weight_of(weight, OC * C);
      ProfileScope t(prof_, Op::Gemm);
      b_->matmul_backward(dinp, dweight, dbias, dy, x, w, N, C, OC, accumulate_dinp,
                          accumulate_dweight);
      return;
    }
    ProfileScope t(prof_, Op::Gemm);
    b_->matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, accumulate_dinp,
                        accumulate_dweight);
  }

  // The experts' GEMMs (grouped_matmul_*: backend_methods.inc), with the
  // low-precision handling of matmul_*: weight (E, OC, C) is found in the
  // working copy, an fp32 inp / dout cast into the scratch.
  void grouped_matmul_forward(Act out, ConstAct inp, const float* weight, const float* bias,
                              const int32_t* counts, int64_t R, int64_t E, int64_t C,
                              int64_t OC) const {
    expect_run_type(out), expect_run_type(inp);
    if (lp_) {
      const ConstAct x = lowp_operand(0, inp, R * C);
      const ConstAct w = weight_of(weight, E * OC * C);
      ProfileScope t(prof_, Op::Gemm);
      b_->grouped_matmul_forward(out, x, w, bias, counts, R, E, C, OC);
      return;
    }
    ProfileScope t(prof_, Op::Gemm);
    b_->grouped_matmul_forward(out, inp, weight, bias, counts, R, E, C, OC);
  }
  void grouped_matmul_backward(float* dinp, float* dweight, float* dbias, ConstAct dout,
                               ConstAct inp, const float* weight, const int32_t* counts,
                               int64_t R, int64_t E, int64_t C, int64_t OC,
                               bool accumulate_dweight = true) const {
    expect_run_type(dout), expect_run_type(inp);
    if (lp_) {
      const ConstAct x = lowp_operand(0, inp, R * C);
      const ConstAct dy = lowp_operand(1, dout, R * OC);
      const ConstAct w = weight_of(weight, E * OC * C);
      ProfileScope t(prof_, Op::Gemm);
      b_->grouped_matmul_backward(dinp, dweight, dbias, dy, x, w, counts, R, E, C, OC,
                                  accumulate_dweight);
      return;
    }
    ProfileScope t(prof_, Op::Gemm);
    b_->grouped_matmul_backward(dinp, dweight, dbias, dout, inp, weight, counts, R, E, C, OC,
                                accumulate_dweight);
  }

  // ---- MoE routing, token moves and combine: memory-bound passes over
  // token rows, charged to Op::Residual with the other adds of rows ----
  void moe_route_forward(int32_t* idx, float* gates, int32_t* slot, int32_t* counts,
                         float* stats, const float* logits, int64_t N, int64_t E, int64_t K,
                         int64_t capacity, int64_t aux_group, bool pre_softmax) const {
    ProfileScope t(prof_, Op::Residual);
    b_->moe_route_forward(idx, gates, slot, counts, stats, logits, N, E, K, capacity, aux_group,
                          pre_softmax);
  }
  void moe_route_backward(float* dlogits, const float* dgates, const float* logits,
                          const int32_t* idx, const float* gates, int64_t N, int64_t E, int64_t K,
                          int64_t aux_group, float aux_scale, float z_scale,
                          bool pre_softmax) const {
    ProfileScope t(prof_, Op::Residual);
    b_->moe_route_backward(dlogits, dgates, logits, idx, gates, N, E, K, aux_group, aux_scale,
                           z_scale, pre_softmax);
  }
  void moe_permute_forward(Act xs, ConstAct x, const int32_t* slot, int64_t N, int64_t K,
                           int64_t C) const {
    expect_run_type(xs), expect_run_type(x);
    ProfileScope t(prof_, Op::Residual);
    b_->moe_permute_forward(xs, x, slot, N, K, C);
  }
  void moe_permute_backward(float* dx, const float* dxs, const int32_t* slot, int64_t N,
                            int64_t K, int64_t C) const {
    ProfileScope t(prof_, Op::Residual);
    b_->moe_permute_backward(dx, dxs, slot, N, K, C);
  }
  void moe_combine_forward(float* out, const float* ys, const float* gates, const int32_t* slot,
                           int64_t N, int64_t K, int64_t C) const {
    ProfileScope t(prof_, Op::Residual);
    b_->moe_combine_forward(out, ys, gates, slot, N, K, C);
  }
  void moe_combine_backward(Act dys, float* dgates, const float* dout, const float* ys,
                            const float* gates, const int32_t* slot, int64_t N, int64_t K,
                            int64_t C) const {
    expect_run_type(dys);
    ProfileScope t(prof_, Op::Residual);
    b_->moe_combine_backward(dys, dgates, dout, ys, gates, slot, N, K, C);
  }

  void moe_shared_gate_forward(float* out, float* gate, const float* glogit, const float* y,
                               int64_t N, int64_t C) const {
    ProfileScope t(prof_, Op::Residual);
    b_->moe_shared_gate_forward(out, gate, glogit, y, N, C);
  }
  void moe_shared_gate_backward(Act dy, float* dglogit, const float* dout, const float* y,
                                const float* gate, int64_t N, int64_t C) const {
    expect_run_type(dy);
    ProfileScope t(prof_, Op::Residual);
    b_->moe_shared_gate_backward(dy, dglogit, dout, y, gate, N, C);
  }

  // Where a kernel whose output only feeds matmul_backward as dout writes
  // it: fp32 (n) into `fp32` itself, or under --bf16 / --fp16 a 16-bit view
  // of the output-gradient scratch, so the producer rounds each element
  // once and matmul_backward casts nothing. Valid until the next
  // matmul_backward that is given an fp32 dout (it reuses the scratch).
  Act grad_operand(float* fp32, int64_t n) const {
    if (!lp_) return fp32;
    return Act(lp_->scratch(1, n), lp_->precision);
  }

  // ---- Op::Cast: out (n) = in (n) in out's type (fp32 <-> bf16 / fp16) ----
  void cast(Act out, ConstAct in, int64_t n) const {
    ProfileScope t(prof_, Op::Cast);
    b_->cast(out, in, n);
  }

  // ---- plain memory, charged to the kind of work it belongs to ----
  // out (n) = in (n), fp32.
  void copy(float* out, const float* in, int64_t n, Op charged_to) const {
    ProfileScope t(prof_, charged_to);
    b_->cast(out, in, n);
  }
  // x (n) = value, in x's type.
  void fill(Act x, float value, int64_t n, Op charged_to) const {
    ProfileScope t(prof_, charged_to);
    b_->fill(x, value, n);
  }

  // ---- Op::LayerNorm ----
  // out in its view's precision; mean, rstd (fp32 statistics) and inp fp32.
  void layernorm_forward(Act out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, int64_t N, int64_t C) const {
    expect_run_type(out);
    ProfileScope t(prof_, Op::LayerNorm);
    b_->layernorm_forward(out, mean, rstd, inp, nullptr, weight, bias, N, C);
  }
  // res (N, C) += addend (N, C), then out = layernorm(res) as above: the
  // residual add fused into the norm (the same bits; charged to the norm).
  void residual_layernorm_forward(Act out, float* mean, float* rstd, float* res,
                                  const float* addend, const float* weight, const float* bias,
                                  int64_t N, int64_t C) const {
    expect_run_type(out);
    ProfileScope t(prof_, Op::LayerNorm);
    b_->layernorm_forward(out, mean, rstd, addend, res, weight, bias, N, C);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, const float* mean,
                          const float* rstd, int64_t N, int64_t C) const {
    ProfileScope t(prof_, Op::LayerNorm);
    b_->layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }

  // ---- Op::LayerNorm also times RMSNorm (the profile's "layernorm" is the norm) ----
  // out in its view's precision; rstd and inp fp32.
  void rmsnorm_forward(Act out, float* rstd, const float* inp, const float* weight, int64_t N,
                       int64_t C, float eps) const {
    expect_run_type(out);
    ProfileScope t(prof_, Op::LayerNorm);
    b_->rmsnorm_forward(out, rstd, inp, weight, N, C, eps);
  }
  void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                        const float* weight, const float* rstd, int64_t N, int64_t C) const {
    ProfileScope t(prof_, Op::LayerNorm);
    b_->rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C);
  }

  // ---- Op::Attention ----
  // qkv and out both fp32 or both 16-bit; lse and dout fp32. heads:
  // attention_heads.h (GQA, RoPE); the (C, NH) forms are GPT-2's heads,
  // AttentionHeads::mha(C, NH).
  void attention_forward(Act out, float* lse, ConstAct qkv, int64_t B, int64_t T,
                         const AttentionHeads& heads, const DropoutSite* drop = nullptr) const {
    expect_run_type(out), expect_run_type(qkv);
    ProfileScope t(prof_, Op::Attention);
    b_->attention_forward(out, lse, qkv, B, T, heads, drop);
  }
  void attention_forward(Act out, float* lse, ConstAct qkv, int64_t B, int64_t T, int64_t C,
                         int64_t NH, const DropoutSite* drop = nullptr) const {
    attention_forward(out, lse, qkv, B, T, mha(C, NH), drop);
  }
  // dqkv like qkv (from grad_operand under --bf16 / --fp16); dout fp32.
  void attention_backward(Act dqkv, const float* dout, ConstAct qkv, ConstAct out,
                          const float* lse, int64_t B, int64_t T, const AttentionHeads& heads,
                          const DropoutSite* drop = nullptr) const {
    expect_run_type(dqkv), expect_run_type(qkv), expect_run_type(out);
    ProfileScope t(prof_, Op::Attention);
    b_->attention_backward(dqkv, dout, qkv, out, lse, B, T, heads, drop);
  }
  void attention_backward(Act dqkv, const float* dout, ConstAct qkv, ConstAct out,
                          const float* lse, int64_t B, int64_t T, int64_t C, int64_t NH,
                          const DropoutSite* drop = nullptr) const {
    attention_backward(dqkv, dout, qkv, out, lse, B, T, mha(C, NH), drop);
  }
  void attention_decode(float* out, const float* q, const float* k_cache, const float* v_cache,
                        int64_t len, const AttentionHeads& heads) const {
    ProfileScope t(prof_, Op::Attention);
    b_->attention_decode(out, q, k_cache, v_cache, len, heads);
  }
  void attention_decode(float* out, const float* q, const float* k_cache, const float* v_cache,
                        int64_t len, int64_t C, int64_t NH) const {
    attention_decode(out, q, k_cache, v_cache, len, mha(C, NH));
  }
  // Ring (context-parallel) attention's pieces (backend_methods.inc),
  // fp32; model/context_parallel.h drives them.
  void ring_kv_pack(float* kv, const float* qkv, int64_t B, int64_t T,
                    const AttentionHeads& heads) const {
    ProfileScope t(prof_, Op::Attention);
    b_->ring_kv_pack(kv, qkv, B, T, heads);
  }
  void ring_attention_forward_block(float* out, float* lse, const float* qkv,
                                    const int64_t* q_pos, int64_t Tq, const float* kv,
                                    const int64_t* k_pos, int64_t Tk, int64_t B, int64_t T,
                                    const AttentionHeads& heads, const DropoutSite* drop) const {
    ProfileScope t(prof_, Op::Attention);
    b_->ring_attention_forward_block(out, lse, qkv, q_pos, Tq, kv, k_pos, Tk, B, T, heads, drop);
  }
  void ring_attention_backward_init(float* D, const float* dout, const float* out, int64_t B,
                                    int64_t Tq, const AttentionHeads& heads) const {
    ProfileScope t(prof_, Op::Attention);
    b_->ring_attention_backward_init(D, dout, out, B, Tq, heads);
  }
  void ring_attention_backward_block(float* dq, float* dkv, const float* dout, const float* qkv,
                                     const float* lse, const float* D, const int64_t* q_pos,
                                     int64_t Tq, const float* kv, const int64_t* k_pos,
                                     int64_t Tk, int64_t B, int64_t T,
                                     const AttentionHeads& heads, const DropoutSite* drop) const {
    ProfileScope t(prof_, Op::Attention);
    b_->ring_attention_backward_block(dq, dkv, dout, qkv, lse, D, q_pos, Tq, kv, k_pos, Tk, B, T,
                                      heads, drop);
  }
  void ring_qkv_grad(Act dqkv, const float* dq, const float* dkv, int64_t B, int64_t T,
                     const AttentionHeads& heads) const {
    ProfileScope t(prof_, Op::Attention);
    b_->ring_qkv_grad(dqkv, dq, dkv, B, T, heads);
  }
  // Keys entering a KV cache under RoPE (charged to attention, as the
  // rotation inside the training kernels).
  void rope_rows(float* x, int64_t rows, int64_t stride, int64_t heads, int64_t HS, int64_t pos0,
                 float base) const {
    ProfileScope t(prof_, Op::Attention);
    b_->rope_rows(x, rows, stride, heads, HS, pos0, base);
  }

  // ---- Op::Dropout (hidden states; the attention probabilities' dropout
  // runs inside attention and is charged there) ----
  void dropout_rows(float* x, int64_t rows, int64_t C, int64_t row0, int64_t T,
                    const DropoutSite& site) const {
    if (!site.active()) return;
    ProfileScope t(prof_, Op::Dropout);
    b_->dropout_rows(x, rows, C, row0, T, site);
  }

  // ---- Op::Gelu ----
  // inp and out both fp32 or both 16-bit.
  void gelu_forward(Act out, ConstAct inp, int64_t n) const {
    expect_run_type(out), expect_run_type(inp);
    ProfileScope t(prof_, Op::Gelu);
    b_->gelu_forward(out, inp, n);
  }
  // fp32: pre (N, C) += bias, out = gelu(pre) (Backend::bias_add with its
  // GELU; charged to the activation).
  void bias_gelu_forward(float* out, float* pre, const float* bias, int64_t N, int64_t C) const {
    ProfileScope t(prof_, Op::Gelu);
    b_->bias_add(pre, bias, N, C, out);
  }
  // dinp and inp both fp32 or both 16-bit (dinp from grad_operand); dout fp32.
  void gelu_backward(Act dinp, ConstAct inp, const float* dout, int64_t n) const {
    expect_run_type(dinp), expect_run_type(inp);
    ProfileScope t(prof_, Op::Gelu);
    b_->gelu_backward(dinp, inp, dout, n);
  }

  // ---- Op::Gelu also times SwiGLU (the profile's "gelu" is the MLP activation) ----
  // inp (N, 2F) [gate | up] and out (N, F) both fp32 or both 16-bit.
  void swiglu_forward(Act out, ConstAct inp, int64_t N, int64_t F) const {
    expect_run_type(out), expect_run_type(inp);
    ProfileScope t(prof_, Op::Gelu);
    b_->swiglu_forward(out, inp, N, F);
  }
  // dinp (N, 2F) and inp both fp32 or both 16-bit (dinp from grad_operand);
  // dout (N, F) fp32.
  void swiglu_backward(Act dinp, ConstAct inp, const float* dout, int64_t N, int64_t F) const {
    expect_run_type(dinp), expect_run_type(inp);
    ProfileScope t(prof_, Op::Gelu);
    b_->swiglu_backward(dinp, inp, dout, N, F);
  }

  // ---- Op::Residual: residual adds, the row-parallel bias, gradient sums ----
  // y (n) += x (n); x fp32, or a bf16 / fp16 view widened exactly.
  void accumulate(float* y, ConstAct x, int64_t n) const {
    ProfileScope t(prof_, Op::Residual);
    b_->accumulate(y, x, n);
  }
  void bias_add(float* out, const float* bias, int64_t N, int64_t C) const {
    ProfileScope t(prof_, Op::Residual);
    b_->bias_add(out, bias, N, C, nullptr);
  }

  // ---- Op::Embedding ----
  void token_embedding_forward(float* out, const int32_t* tokens, const float* wte, int64_t N,
                               int64_t C, int64_t vocab_begin, int64_t vocab_end) const {
    ProfileScope t(prof_, Op::Embedding);
    b_->token_embedding_forward(out, tokens, wte, N, C, vocab_begin, vocab_end);
  }
  void token_embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int64_t N,
                                int64_t C, int64_t vocab_begin, int64_t vocab_end) const {
    ProfileScope t(prof_, Op::Embedding);
    b_->token_embedding_backward(dwte, dout, tokens, N, C, vocab_begin, vocab_end);
  }
  void position_embedding_forward(float* out, const float* wpe, int64_t B, int64_t T, int64_t C,
                                  int64_t pos0) const {
    ProfileScope t(prof_, Op::Embedding);
    b_->position_embedding_forward(out, wpe, B, T, C, pos0);
  }
  void position_embedding_backward(float* dwpe, const float* dout, int64_t B, int64_t T,
                                   int64_t C) const {
    ProfileScope t(prof_, Op::Embedding);
    b_->position_embedding_backward(dwpe, dout, B, T, C);
  }

  // ---- Op::Loss ----
  void cross_entropy_forward(float* losses, float* lse, const float* logits,
                             const int32_t* targets, int64_t N, int64_t V) const {
    ProfileScope t(prof_, Op::Loss);
    b_->cross_entropy_forward(losses, lse, logits, targets, N, V);
  }
  // dlogits: fp32 (may alias logits) or a 16-bit view (grad_operand), over
  // this rank's V vocabulary columns from vocab_begin (0: all of them).
  void cross_entropy_backward(Act dlogits, const float* logits, const float* lse,
                              const int32_t* targets, float dloss, int64_t N, int64_t V,
                              int64_t vocab_begin = 0) const {
    expect_run_type(dlogits);
    ProfileScope t(prof_, Op::Loss);
    b_->cross_entropy_backward(dlogits, logits, lse, targets, dloss, N, V, vocab_begin);
  }
  void vp_xent_local_max(float* row_max, const float* logits, int64_t N, int64_t V) const {
    ProfileScope t(prof_, Op::Loss);
    b_->vp_xent_local_max(row_max, logits, N, V);
  }
  void vp_xent_local_sums(float* sums, const float* logits, const float* row_max,
                          const int32_t* targets, int64_t N, int64_t V,
                          int64_t vocab_begin) const {
    ProfileScope t(prof_, Op::Loss);
    b_->vp_xent_local_sums(sums, logits, row_max, targets, N, V, vocab_begin);
  }
  void vp_xent_finish(float* losses, float* lse, const float* row_max, const float* sums,
                      const int32_t* targets, int64_t N) const {
    ProfileScope t(prof_, Op::Loss);
    b_->vp_xent_finish(losses, lse, row_max, sums, targets, N);
  }

  // ---- Op::Optimizer, Op::GradNorm ----
  // working: null, or the bf16 / fp16 working copy written in the same pass.
  void adamw_update(float* params, float* grads, float* m, float* v, int64_t n,
                    const AdamWArgs& args, Act working = {}) const {
    ProfileScope t(prof_, Op::Optimizer);
    b_->adamw_update(params, grads, m, v, n, args, working);
  }
  double sum_squares(const float* x, int64_t n) const {
    ProfileScope t(prof_, Op::GradNorm);
    return b_->sum_squares(x, n);
  }

 private:
  // GPT-2's heads, after the check the (C, NH) kernels make.
  static AttentionHeads mha(int64_t C, int64_t NH) {
    TESSERA_CHECK(NH > 0 && C % NH == 0, "attention: width {} is not divisible by {} heads", C, NH);
    return AttentionHeads::mha(C, NH);
  }
  // A GEMM operand in the run's 16 bits: a 16-bit view as it is, an fp32
  // one cast into scratch slot `slot`.
  ConstAct lowp_operand(int slot, ConstAct a, int64_t n) const {
    if (a.lowp()) return a;
    const Act s(lp_->scratch(slot, n), lp_->precision);
    cast(s, a, n);
    return s;
  }
  // An activation is fp32, or 16 bits of the run's own low precision.
  void expect_run_type(ConstAct a) const {
    if (!a.lowp()) return;
    TESSERA_CHECK(lp_, "kernels::Ops: a 16-bit activation without --bf16 / --fp16 state");
    TESSERA_CHECK(a.dtype == lp_->precision, "kernels::Ops: a {} activation in a {} run",
                  precision_name(a.dtype), precision_name(lp_->precision));
  }
  // The working copy of an fp32 weight, or (a weight outside it) a cast
  // into the scratch.
  ConstAct weight_of(const float* w, int64_t n) const {
    if (const uint16_t* p = lp_->find(w)) return ConstAct(p, lp_->precision);
    const Act s(lp_->scratch(2, n), lp_->precision);
    cast(s, w, n);
    return s;
  }

  const Backend* b_;
  Profile* prof_;
  const LowPrecision* lp_;  // null: fp32
};

}  // namespace tessera::kernels

// kernels::Ops: what the model calls. A small non-virtual facade over a
// Backend that charges each call's time to the step's Profile under the
// op's kind (Op::Gemm, Op::LayerNorm, ...), so the model's call lists stay
// flat — `ops.matmul_forward(out, inp, w, b, N, C, OC);` — with the timing
// part of the call rather than wrapped around it. A null profile costs one
// branch per call.
//
// Arguments and shapes are the Backend's (backend.h), one method per
// backend op.
#pragma once
#include <cstdint>

#include "tessera/core/profile.h"
#include "tessera/kernels/backend.h"
#include "tessera/kernels/precision.h"

namespace tessera::kernels {

class Ops {
 public:
  // lowp: the model's low-precision state under --bf16 / --fp16 (null or
  // inactive: fp32, every call exactly the fp32 backend method).
  Ops(const Backend& backend, Profile* profile, const LowPrecision* lowp = nullptr)
      : b_(&backend), prof_(profile), lp_(lowp && lowp->active() ? lowp : nullptr) {}

  const Backend& backend() const { return *b_; }
  // The profile the calls are charged to (null: not profiling); the model's
  // communication helpers charge theirs to the same one.
  Profile* profile() const { return prof_; }

  // ---- Op::Gemm (under --bf16 / --fp16 the operands' casts: Op::Cast) ----
  // Low precision: inp (and dout) are cast into the scratch, the weight is
  // read from the working copy; out and the gradients stay fp32.
  void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                      int64_t N, int64_t C, int64_t OC) const {
    if (lp_) {
      uint16_t* x = lp_->scratch(0, N * C);
      cast(x, inp, N * C);
      const uint16_t* w = weight_of(weight, OC * C);
      ProfileScope t(prof_, Op::Gemm);
      if (lp_->precision == Precision::Bf16)
        b_->matmul_forward_bf16(out, x, w, bias, N, C, OC);
      else
        b_->matmul_forward_fp16(out, x, w, bias, N, C, OC);
      return;
    }
    ProfileScope t(prof_, Op::Gemm);
    b_->matmul_forward(out, inp, weight, bias, N, C, OC);
  }
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, int64_t N, int64_t C, int64_t OC,
                       bool accumulate_dinp = false) const {
    if (lp_) {
      uint16_t* x = lp_->scratch(0, N * C);
      uint16_t* dy = lp_->scratch(1, N * OC);
      cast(x, inp, N * C);
      cast(dy, dout, N * OC);
      const uint16_t* w = weight_of(weight, OC * C);
      ProfileScope t(prof_, Op::Gemm);
      if (lp_->precision == Precision::Bf16)
        b_->matmul_backward_bf16(dinp, dweight, dbias, dy, x, w, N, C, OC, accumulate_dinp);
      else
        b_->matmul_backward_fp16(dinp, dweight, dbias, dy, x, w, N, C, OC, accumulate_dinp);
      return;
    }
    ProfileScope t(prof_, Op::Gemm);
    b_->matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, accumulate_dinp);
  }

  // ---- Op::Cast: fp32 -> the low precision p (bf16 or fp16) ----
  void cast(uint16_t* out, const float* in, int64_t n, Precision p) const {
    ProfileScope t(prof_, Op::Cast);
    if (p == Precision::Bf16)
      b_->cast_to_bf16(out, in, n);
    else
      b_->cast_to_fp16(out, in, n);
  }

  // ---- Op::LayerNorm ----
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, int64_t N, int64_t C) const {
    ProfileScope t(prof_, Op::LayerNorm);
    b_->layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, const float* mean,
                          const float* rstd, int64_t N, int64_t C) const {
    ProfileScope t(prof_, Op::LayerNorm);
    b_->layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }

  // ---- Op::Attention ----
  void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T,
                         int64_t C, int64_t NH, const DropoutSite* drop = nullptr) const {
    ProfileScope t(prof_, Op::Attention);
    b_->attention_forward(out, lse, qkv, B, T, C, NH, drop);
  }
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                          const float* lse, int64_t B, int64_t T, int64_t C, int64_t NH,
                          const DropoutSite* drop = nullptr) const {
    ProfileScope t(prof_, Op::Attention);
    b_->attention_backward(dqkv, dout, qkv, out, lse, B, T, C, NH, drop);
  }
  void attention_decode(float* out, const float* q, const float* k_cache, const float* v_cache,
                        int64_t len, int64_t C, int64_t NH) const {
    ProfileScope t(prof_, Op::Attention);
    b_->attention_decode(out, q, k_cache, v_cache, len, C, NH);
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
  void gelu_forward(float* out, const float* inp, int64_t n) const {
    ProfileScope t(prof_, Op::Gelu);
    b_->gelu_forward(out, inp, n);
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) const {
    ProfileScope t(prof_, Op::Gelu);
    b_->gelu_backward(dinp, inp, dout, n);
  }

  // ---- Op::Residual: residual adds, the row-parallel bias, gradient sums ----
  void add(float* out, const float* a, const float* b, int64_t n) const {
    ProfileScope t(prof_, Op::Residual);
    b_->add(out, a, b, n);
  }
  void accumulate(float* y, const float* x, int64_t n) const {
    ProfileScope t(prof_, Op::Residual);
    b_->accumulate(y, x, n);
  }
  void bias_add(float* out, const float* bias, int64_t N, int64_t C) const {
    ProfileScope t(prof_, Op::Residual);
    b_->bias_add(out, bias, N, C);
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
  void cross_entropy_backward(float* dlogits, const float* logits, const float* lse,
                              const int32_t* targets, float dloss, int64_t N, int64_t V) const {
    ProfileScope t(prof_, Op::Loss);
    b_->cross_entropy_backward(dlogits, logits, lse, targets, dloss, N, V);
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
  void vp_xent_backward(float* dlogits, const float* logits, const float* lse,
                        const int32_t* targets, float dloss, int64_t N, int64_t V,
                        int64_t vocab_begin) const {
    ProfileScope t(prof_, Op::Loss);
    b_->vp_xent_backward(dlogits, logits, lse, targets, dloss, N, V, vocab_begin);
  }

 private:
  void cast(uint16_t* out, const float* in, int64_t n) const { cast(out, in, n, lp_->precision); }
  // The working copy of an fp32 weight, or (a weight outside it) a cast
  // into the scratch.
  const uint16_t* weight_of(const float* w, int64_t n) const {
    if (const uint16_t* p = lp_->find(w)) return p;
    uint16_t* s = lp_->scratch(2, n);
    cast(s, w, n);
    return s;
  }

  const Backend* b_;
  Profile* prof_;
  const LowPrecision* lp_;  // null: fp32
};

}  // namespace tessera::kernels

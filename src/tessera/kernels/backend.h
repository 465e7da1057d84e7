// The kernel backend seam: every kernel the model runs, as one abstract
// interface grouped by op family. The CPU implementation (kernels/cpu/,
// wired in cpu/cpu_backend.cpp) is the reference; a GPU backend is a new
// folder that implements this class, and the model does not change.
//
// The model does not call a Backend directly: it calls kernels::Ops
// (ops.h), which charges each call's time to the step's profile.
//
// Conventions: row-major buffers, shapes in the comments of the matching
// kernels/cpu/*.h header (which says what each argument holds). Every
// buffer here is fp32, the reference precision, except the low-precision
// GEMMs and casts (bf16 / fp16 inputs, fp32 accumulation) of --bf16 /
// --fp16 and the kernels that store activations in 16 bits (layernorm,
// rmsnorm, attention, GELU and SwiGLU outputs, the GEMM outputs qkv and fch), which sit beside the fp32 ones as methods of their own
// (the fp32 ones stay as they are), so a backend that lacks a precision
// says so at compile time rather than through a runtime dtype tag. They are
// named methods (matmul_forward_bf16, ...) rather than overloads because
// bf16_t and fp16_t are both uint16_t bit patterns (core/dtype.h).
#pragma once
#include <cstdint>

#include "tessera/core/dtype.h"
#include "tessera/kernels/attention_heads.h"
#include "tessera/kernels/dropout_site.h"

namespace tessera::kernels {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // ---- matmul: out (N, OC) = inp (N, C) @ weight (OC, C)^T (+ bias (OC)) ----
  virtual void matmul_forward(float* out, const float* inp, const float* weight,
                              const float* bias, int64_t N, int64_t C, int64_t OC) const = 0;
  // dinp (N, C) (=, or += with accumulate_dinp; skipped when null), dweight
  // (OC, C) (+=, or = without accumulate_dweight: the step's first backward,
  // when the gradient holds zeros and need not be read), dbias (OC) +=
  // (skipped when null).
  virtual void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* weight, int64_t N, int64_t C,
                               int64_t OC, bool accumulate_dinp,
                               bool accumulate_dweight) const = 0;
  // The same GEMMs with bf16 (fp16) inputs and fp32 accumulation; out,
  // dinp, dweight, dbias and bias stay fp32 (kernels/cpu/matmul_lowp.h).
  virtual void matmul_forward_bf16(float* out, const bf16_t* inp, const bf16_t* weight,
                                   const float* bias, int64_t N, int64_t C, int64_t OC) const = 0;
  virtual void matmul_backward_bf16(float* dinp, float* dweight, float* dbias, const bf16_t* dout,
                                    const bf16_t* inp, const bf16_t* weight, int64_t N, int64_t C,
                                    int64_t OC, bool accumulate_dinp,
                               bool accumulate_dweight) const = 0;
  virtual void matmul_forward_fp16(float* out, const fp16_t* inp, const fp16_t* weight,
                                   const float* bias, int64_t N, int64_t C, int64_t OC) const = 0;
  virtual void matmul_backward_fp16(float* dinp, float* dweight, float* dbias, const fp16_t* dout,
                                    const fp16_t* inp, const fp16_t* weight, int64_t N, int64_t C,
                                    int64_t OC, bool accumulate_dinp,
                               bool accumulate_dweight) const = 0;
  // The forward with out stored in 16 bits (rounded once, after the fp32
  // bias): a GEMM whose output is a stored activation (qkv, fch).
  virtual void matmul_forward_bf16_out(bf16_t* out, const bf16_t* inp, const bf16_t* weight,
                                       const float* bias, int64_t N, int64_t C,
                                       int64_t OC) const = 0;
  virtual void matmul_forward_fp16_out(fp16_t* out, const fp16_t* inp, const fp16_t* weight,
                                       const float* bias, int64_t N, int64_t C,
                                       int64_t OC) const = 0;
  // ---- casts fp32 -> bf16 / fp16 (round to nearest even), elementwise over n ----
  virtual void cast_to_bf16(bf16_t* out, const float* in, int64_t n) const = 0;
  virtual void cast_to_fp16(fp16_t* out, const float* in, int64_t n) const = 0;
  // out (N, C) += bias (C) row by row: the row-parallel linear's bias, added
  // once after the tensor-parallel sum.
  virtual void bias_add(float* out, const float* bias, int64_t N, int64_t C) const = 0;

  // ---- layernorm over the last dimension; mean, rstd (N) saved for backward ----
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                 const float* weight, const float* bias, int64_t N,
                                 int64_t C) const = 0;
  // The same with out stored in 16 bits; mean and rstd stay fp32.
  virtual void layernorm_forward_bf16(bf16_t* out, float* mean, float* rstd, const float* inp,
                                      const float* weight, const float* bias, int64_t N,
                                      int64_t C) const = 0;
  virtual void layernorm_forward_fp16(fp16_t* out, float* mean, float* rstd, const float* inp,
                                      const float* weight, const float* bias, int64_t N,
                                      int64_t C) const = 0;
  // res (N, C) += addend (N, C), then layernorm_forward of the sum: the
  // residual add fused into the norm that reads it (same bits as add, then
  // layernorm_forward; one sweep of the residual stream instead of two).
  virtual void residual_layernorm_forward(float* out, float* mean, float* rstd, float* res,
                                          const float* addend, const float* weight,
                                          const float* bias, int64_t N, int64_t C) const = 0;
  virtual void residual_layernorm_forward_bf16(bf16_t* out, float* mean, float* rstd, float* res,
                                               const float* addend, const float* weight,
                                               const float* bias, int64_t N, int64_t C) const = 0;
  virtual void residual_layernorm_forward_fp16(fp16_t* out, float* mean, float* rstd, float* res,
                                               const float* addend, const float* weight,
                                               const float* bias, int64_t N, int64_t C) const = 0;
  // dinp (N, C) +=, dweight (C) +=, dbias (C) +=.
  virtual void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const float* inp, const float* weight, const float* mean,
                                  const float* rstd, int64_t N, int64_t C) const = 0;

  // ---- rmsnorm over the last dimension (no bias); rstd (N) saved for backward ----
  // eps: --norm-epsilon.
  virtual void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight,
                               int64_t N, int64_t C, float eps) const = 0;
  // The same with out stored in 16 bits; rstd stays fp32.
  virtual void rmsnorm_forward_bf16(bf16_t* out, float* rstd, const float* inp,
                                    const float* weight, int64_t N, int64_t C,
                                    float eps) const = 0;
  virtual void rmsnorm_forward_fp16(fp16_t* out, float* rstd, const float* inp,
                                    const float* weight, int64_t N, int64_t C,
                                    float eps) const = 0;
  // dinp (N, C) +=, dweight (C) +=.
  virtual void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                                const float* weight, const float* rstd, int64_t N,
                                int64_t C) const = 0;

  // ---- causal self-attention: qkv (B, T, heads.qkv_width()) -> out (B, T,
  // NH * HS), lse (B, NH, T). heads (attention_heads.h): query and
  // key/value head counts (GQA), head size, rotary base (RoPE inside the
  // kernel); GPT-2's attention is AttentionHeads::mha(C, NH). ----
  // drop: dropout of the probabilities (null or p = 0: none); backward takes
  // the same site and draws the same mask again.
  virtual void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T,
                                 const AttentionHeads& heads, const DropoutSite* drop) const = 0;
  // dqkv (B, T, heads.qkv_width()) written: the gradient of the stored
  // (unrotated) qkv.
  virtual void attention_backward(float* dqkv, const float* dout, const float* qkv,
                                  const float* out, const float* lse, int64_t B, int64_t T,
                                  const AttentionHeads& heads, const DropoutSite* drop) const = 0;
  // qkv, out and dqkv stored in 16 bits (dqkv feeds the qkv GEMM's
  // backward); lse, the softmax and dout stay fp32.
  virtual void attention_forward_bf16(bf16_t* out, float* lse, const bf16_t* qkv, int64_t B,
                                      int64_t T, const AttentionHeads& heads,
                                      const DropoutSite* drop) const = 0;
  virtual void attention_forward_fp16(fp16_t* out, float* lse, const fp16_t* qkv, int64_t B,
                                      int64_t T, const AttentionHeads& heads,
                                      const DropoutSite* drop) const = 0;
  virtual void attention_backward_bf16(bf16_t* dqkv, const float* dout, const bf16_t* qkv,
                                       const bf16_t* out, const float* lse, int64_t B, int64_t T,
                                       const AttentionHeads& heads,
                                       const DropoutSite* drop) const = 0;
  virtual void attention_backward_fp16(fp16_t* dqkv, const float* dout, const fp16_t* qkv,
                                       const fp16_t* out, const float* lse, int64_t B, int64_t T,
                                       const AttentionHeads& heads,
                                       const DropoutSite* drop) const = 0;
  // One decoding step with a KV cache: q (NH * HS) of position len-1
  // (rotated inside under RoPE) against rows 0..len-1 of k_cache and
  // v_cache (max_T, KVH * HS), whose keys are stored rotated (rope_rows as
  // they are appended); out (NH * HS).
  virtual void attention_decode(float* out, const float* q, const float* k_cache,
                                const float* v_cache, int64_t len,
                                const AttentionHeads& heads) const = 0;
  // x (rows, stride): the first heads * HS columns of row r, heads of HS,
  // rotated in place to position pos0 + r (RoPE of keys entering a cache).
  virtual void rope_rows(float* x, int64_t rows, int64_t stride, int64_t heads, int64_t HS,
                         int64_t pos0, float base) const = 0;

  // ---- gelu (tanh approximation), elementwise over n ----
  virtual void gelu_forward(float* out, const float* inp, int64_t n) const = 0;
  // pre (N, C) += bias (C), then out (N, C) = gelu(pre): the fc linear's
  // bias fused into its activation (fp32; the bits of bias_add then gelu).
  virtual void bias_gelu_forward(float* out, float* pre, const float* bias, int64_t N,
                                 int64_t C) const = 0;
  virtual void gelu_backward(float* dinp, const float* inp, const float* dout,
                             int64_t n) const = 0;
  // inp, out and dinp stored in 16 bits (dinp feeds a GEMM); dout stays fp32.
  virtual void gelu_forward_bf16(bf16_t* out, const bf16_t* inp, int64_t n) const = 0;
  virtual void gelu_forward_fp16(fp16_t* out, const fp16_t* inp, int64_t n) const = 0;
  virtual void gelu_backward_bf16(bf16_t* dinp, const bf16_t* inp, const float* dout,
                                  int64_t n) const = 0;
  virtual void gelu_backward_fp16(fp16_t* dinp, const fp16_t* inp, const float* dout,
                                  int64_t n) const = 0;

  // ---- swiglu: inp (N, 2F) rows [gate | up] -> out (N, F) = silu(gate) * up ----
  virtual void swiglu_forward(float* out, const float* inp, int64_t N, int64_t F) const = 0;
  // dinp (N, 2F) written from dout (N, F).
  virtual void swiglu_backward(float* dinp, const float* inp, const float* dout, int64_t N,
                               int64_t F) const = 0;
  // inp, out and dinp stored in 16 bits (as GELU's); dout stays fp32.
  virtual void swiglu_forward_bf16(bf16_t* out, const bf16_t* inp, int64_t N,
                                   int64_t F) const = 0;
  virtual void swiglu_forward_fp16(fp16_t* out, const fp16_t* inp, int64_t N,
                                   int64_t F) const = 0;
  virtual void swiglu_backward_bf16(bf16_t* dinp, const bf16_t* inp, const float* dout,
                                    int64_t N, int64_t F) const = 0;
  virtual void swiglu_backward_fp16(fp16_t* dinp, const fp16_t* inp, const float* dout,
                                    int64_t N, int64_t F) const = 0;

  // ---- dropout of token rows: x (rows, C) *= mask / (1-p) in place; rows
  // are global rows row0.. of a micro-batch of sequences of T tokens. The
  // backward is the same call on the gradient. ----
  virtual void dropout_rows(float* x, int64_t rows, int64_t C, int64_t row0, int64_t T,
                            const DropoutSite& site) const = 0;

  // ---- elementwise ----
  virtual void add(float* out, const float* a, const float* b, int64_t n) const = 0;
  virtual void accumulate(float* y, const float* x, int64_t n) const = 0;  // y += x

  // ---- embedding: rows of wte for tokens in [vocab_begin, vocab_end), others zero ----
  virtual void token_embedding_forward(float* out, const int32_t* tokens, const float* wte,
                                       int64_t N, int64_t C, int64_t vocab_begin,
                                       int64_t vocab_end) const = 0;
  virtual void token_embedding_backward(float* dwte, const float* dout, const int32_t* tokens,
                                        int64_t N, int64_t C, int64_t vocab_begin,
                                        int64_t vocab_end) const = 0;
  // out (B, T, C) += wpe rows pos0 .. pos0 + T.
  virtual void position_embedding_forward(float* out, const float* wpe, int64_t B, int64_t T,
                                          int64_t C, int64_t pos0) const = 0;
  virtual void position_embedding_backward(float* dwpe, const float* dout, int64_t B, int64_t T,
                                           int64_t C) const = 0;

  // ---- cross-entropy over logits (N, V), whole vocabulary on this rank ----
  virtual void cross_entropy_forward(float* losses, float* lse, const float* logits,
                                     const int32_t* targets, int64_t N, int64_t V) const = 0;
  virtual void cross_entropy_backward(float* dlogits, const float* logits, const float* lse,
                                      const int32_t* targets, float dloss, int64_t N,
                                      int64_t V) const = 0;
  // dlogits in 16 bits (a separate buffer: it feeds the LM head's GEMMs).
  virtual void cross_entropy_backward_bf16(bf16_t* dlogits, const float* logits,
                                           const float* lse, const int32_t* targets, float dloss,
                                           int64_t N, int64_t V) const = 0;
  virtual void cross_entropy_backward_fp16(fp16_t* dlogits, const float* logits,
                                           const float* lse, const int32_t* targets, float dloss,
                                           int64_t N, int64_t V) const = 0;
  // ---- vocab-parallel cross-entropy: the local steps between the tp reductions ----
  virtual void vp_xent_local_max(float* row_max, const float* logits, int64_t N,
                                 int64_t V) const = 0;
  virtual void vp_xent_local_sums(float* sums, const float* logits, const float* row_max,
                                  const int32_t* targets, int64_t N, int64_t V,
                                  int64_t vocab_begin) const = 0;
  virtual void vp_xent_finish(float* losses, float* lse, const float* row_max, const float* sums,
                              const int32_t* targets, int64_t N) const = 0;
  virtual void vp_xent_backward(float* dlogits, const float* logits, const float* lse,
                                const int32_t* targets, float dloss, int64_t N, int64_t V,
                                int64_t vocab_begin) const = 0;
  virtual void vp_xent_backward_bf16(bf16_t* dlogits, const float* logits, const float* lse,
                                     const int32_t* targets, float dloss, int64_t N, int64_t V,
                                     int64_t vocab_begin) const = 0;
  virtual void vp_xent_backward_fp16(fp16_t* dlogits, const float* logits, const float* lse,
                                     const int32_t* targets, float dloss, int64_t N, int64_t V,
                                     int64_t vocab_begin) const = 0;
};

}  // namespace tessera::kernels

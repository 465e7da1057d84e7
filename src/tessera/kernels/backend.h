// The kernel backend seam: every kernel the engine runs on a buffer, each
// declared once, as one abstract interface grouped by op family. The CPU
// implementation (kernels/cpu/cpu_backend.cpp over the kernels of
// kernels/cpu/) is the reference; a GPU backend, or a tracing backend that
// only counts, is another class that implements this one, and the model,
// the optimizer and the data-parallel engine do not change.
//
// The engine does not call a Backend directly: it calls kernels::Ops
// (ops.h), which picks the views' precisions, casts GEMM operands under
// --bf16 / --fp16 and charges each call's time to the step's profile.
//
// Conventions. Row-major buffers; the shape of each is in the comment of
// its method. A buffer whose element type can vary is a dtype-tagged view
// (Act, ConstAct: precision.h), and the backend dispatches on the tags; a
// combination it has no kernel for is a tessera::Error. A plain float* is
// always fp32 (statistics, gradients, the residual stream, optimizer state,
// the loss). Every method's arguments say the shapes and element types of
// all its buffers, so its cost (elements, bytes, FLOPs) follows from them
// without reading any buffer (the one exception, embedding rows outside
// [vocab_begin, vocab_end), is a skipped copy, not extra work).
//
// Costs. Beside each method, its *_cost function states that cost from the
// shapes and types (backend.cpp): the calls it amounts to (a fused kernel
// as its parts), each with the elements it is applied to, the bytes it
// reads and writes and the FLOPs of its matmuls. The tracing backend
// (trace_backend.h) records them, which is how the planner learns what the
// engine runs (model/op_trace.h); they are the CPU kernels' figures.
#pragma once
#include <cstdint>
#include <string_view>

#include "tessera/kernels/adamw_args.h"
#include "tessera/kernels/attention_heads.h"
#include "tessera/kernels/dropout_site.h"
#include "tessera/kernels/kernel_call.h"
#include "tessera/kernels/precision.h"

namespace tessera::kernels {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // ---- matmul: out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias (OC) ----
  // inp and weight both fp32, or both bf16 / fp16 (fp32 accumulation). out
  // fp32, or (16-bit inputs) the inputs' type: rounded once, after the fp32
  // bias, for a GEMM whose output is a stored activation (qkv, fch). bias
  // fp32, may be null.
  virtual void matmul_forward(Act out, ConstAct inp, ConstAct weight, const float* bias,
                              int64_t N, int64_t C, int64_t OC) const = 0;
  static KernelCalls matmul_forward_cost(Precision in, Precision out, bool bias, int64_t N,
                                         int64_t C, int64_t OC);
  // dout (N, OC), inp (N, C), weight (OC, C): one type, as in forward; the
  // gradients fp32. dinp (N, C) = (or += with accumulate_dinp) dout @ weight,
  // skipped when null. dweight (OC, C) += (or = without accumulate_dweight:
  // the step's first backward, when it holds zeros and need not be read)
  // dout^T @ inp, skipped when null. dbias (OC) += column sums of dout,
  // skipped when null.
  virtual void matmul_backward(float* dinp, float* dweight, float* dbias, ConstAct dout,
                               ConstAct inp, ConstAct weight, int64_t N, int64_t C, int64_t OC,
                               bool accumulate_dinp, bool accumulate_dweight) const = 0;
  static KernelCalls matmul_backward_cost(Precision in, bool dinp, bool dweight, bool dbias,
                                          int64_t N, int64_t C, int64_t OC);

  // ---- element types and plain memory ----
  // out (n) = in (n) in out's type: a copy when the types agree; fp32 ->
  // bf16 / fp16 rounds to nearest even; bf16 / fp16 -> fp32 is exact. in
  // and out do not overlap.
  virtual void cast(Act out, ConstAct in, int64_t n) const = 0;
  static KernelCalls cast_cost(Precision out, Precision in, int64_t n);
  // x (n) = value, in x's type.
  virtual void fill(Act x, float value, int64_t n) const = 0;
  static KernelCalls fill_cost(Precision x, int64_t n);
  // y (n) += x (n); x fp32, or bf16 widened exactly (a reduced bf16
  // gradient summed into fp32).
  virtual void accumulate(float* y, ConstAct x, int64_t n) const = 0;
  static KernelCalls accumulate_cost(Precision x, int64_t n);
  // out (N, C) += bias (C) row by row: a row-parallel linear's bias, added
  // once after the tensor-parallel sum. With gelu_out (fp32): also
  // gelu_out (N, C) = gelu(out) in the same sweep, the fc linear's bias
  // fused into its activation (the bits of bias_add, then gelu_forward).
  virtual void bias_add(float* out, const float* bias, int64_t N, int64_t C,
                        float* gelu_out) const = 0;
  static KernelCalls bias_add_cost(bool gelu, int64_t N, int64_t C);

  // ---- layernorm over the last dimension; mean, rstd (N) saved for backward ----
  // out (N, C) in its view's type (fp32, bf16, fp16) = layernorm(x) *
  // weight (C) + bias (C), x (N, C) fp32. res null: x = inp. res (N, C)
  // given: res += inp first, then x = res (the residual add fused into the
  // norm that reads it: the bits of accumulate then layernorm, one sweep).
  virtual void layernorm_forward(Act out, float* mean, float* rstd, const float* inp, float* res,
                                 const float* weight, const float* bias, int64_t N,
                                 int64_t C) const = 0;
  static KernelCalls layernorm_forward_cost(Precision out, bool res, int64_t N, int64_t C);
  // dinp (N, C) +=, dweight (C) +=, dbias (C) += (dout, inp fp32).
  virtual void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const float* inp, const float* weight, const float* mean,
                                  const float* rstd, int64_t N, int64_t C) const = 0;
  static KernelCalls layernorm_backward_cost(int64_t N, int64_t C);

  // ---- rmsnorm over the last dimension (no bias); rstd (N) saved for backward ----
  // out (N, C) in its view's type; inp (N, C) fp32; eps: --norm-epsilon.
  virtual void rmsnorm_forward(Act out, float* rstd, const float* inp, const float* weight,
                               int64_t N, int64_t C, float eps) const = 0;
  static KernelCalls rmsnorm_forward_cost(Precision out, int64_t N, int64_t C);
  // dinp (N, C) +=, dweight (C) +=.
  virtual void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                                const float* weight, const float* rstd, int64_t N,
                                int64_t C) const = 0;
  static KernelCalls rmsnorm_backward_cost(int64_t N, int64_t C);

  // ---- causal self-attention: qkv (B, T, heads.qkv_width()) -> out (B, T,
  // NH * HS), lse (B, NH, T) fp32. heads (attention_heads.h): query and
  // key/value head counts (GQA), head size, rotary base (RoPE inside the
  // kernel). qkv and out of one type (fp32, bf16, fp16); the softmax in fp32.
  // drop: dropout of the probabilities (null or p = 0: none); backward takes
  // the same site and draws the same mask again. ----
  virtual void attention_forward(Act out, float* lse, ConstAct qkv, int64_t B, int64_t T,
                                 const AttentionHeads& heads, const DropoutSite* drop) const = 0;
  static KernelCalls attention_forward_cost(Precision dtype, int64_t B, int64_t T,
                                            const AttentionHeads& heads, const DropoutSite* drop);
  // dqkv (B, T, heads.qkv_width()) written, of qkv's type: the gradient of
  // the stored (unrotated) qkv. dout (B, T, NH * HS) fp32.
  virtual void attention_backward(Act dqkv, const float* dout, ConstAct qkv, ConstAct out,
                                  const float* lse, int64_t B, int64_t T,
                                  const AttentionHeads& heads, const DropoutSite* drop) const = 0;
  static KernelCalls attention_backward_cost(Precision dtype, int64_t B, int64_t T,
                                             const AttentionHeads& heads,
                                             const DropoutSite* drop);
  // One decoding step with a KV cache: q (NH * HS) of position len-1
  // (rotated inside under RoPE) against rows 0..len-1 of k_cache and
  // v_cache (max_T, KVH * HS), whose keys are stored rotated (rope_rows as
  // they are appended); out (NH * HS).
  virtual void attention_decode(float* out, const float* q, const float* k_cache,
                                const float* v_cache, int64_t len,
                                const AttentionHeads& heads) const = 0;
  static KernelCalls attention_decode_cost(int64_t len, const AttentionHeads& heads);
  // x (rows, stride): the first heads * HS columns of row r, heads of HS,
  // rotated in place to position pos0 + r (RoPE of keys entering a cache).
  virtual void rope_rows(float* x, int64_t rows, int64_t stride, int64_t heads, int64_t HS,
                         int64_t pos0, float base) const = 0;
  static KernelCalls rope_rows_cost(int64_t rows, int64_t heads, int64_t HS);

  // ---- gelu (tanh approximation), elementwise over n ----
  // inp and out of one type (fp32, bf16, fp16).
  virtual void gelu_forward(Act out, ConstAct inp, int64_t n) const = 0;
  static KernelCalls gelu_forward_cost(Precision dtype, int64_t n);
  // dinp (n) of inp's type (it feeds a GEMM); dout (n) fp32.
  virtual void gelu_backward(Act dinp, ConstAct inp, const float* dout, int64_t n) const = 0;
  static KernelCalls gelu_backward_cost(Precision dtype, int64_t n);

  // ---- swiglu: inp (N, 2F) rows [gate | up] -> out (N, F) = silu(gate) * up ----
  // inp and out of one type.
  virtual void swiglu_forward(Act out, ConstAct inp, int64_t N, int64_t F) const = 0;
  static KernelCalls swiglu_forward_cost(Precision dtype, int64_t N, int64_t F);
  // dinp (N, 2F) of inp's type, written from dout (N, F) fp32.
  virtual void swiglu_backward(Act dinp, ConstAct inp, const float* dout, int64_t N,
                               int64_t F) const = 0;
  static KernelCalls swiglu_backward_cost(Precision dtype, int64_t N, int64_t F);

  // ---- dropout of token rows: x (rows, C) *= mask / (1-p) in place; rows
  // are global rows row0.. of a micro-batch of sequences of T tokens. The
  // backward is the same call on the gradient. ----
  virtual void dropout_rows(float* x, int64_t rows, int64_t C, int64_t row0, int64_t T,
                            const DropoutSite& site) const = 0;
  static KernelCalls dropout_rows_cost(int64_t rows, int64_t C);

  // ---- embedding: rows of wte for tokens in [vocab_begin, vocab_end), others zero ----
  // out (N, C) written; tokens (N).
  virtual void token_embedding_forward(float* out, const int32_t* tokens, const float* wte,
                                       int64_t N, int64_t C, int64_t vocab_begin,
                                       int64_t vocab_end) const = 0;
  static KernelCalls token_embedding_forward_cost(int64_t N, int64_t C);
  // dwte (vocab_end - vocab_begin, C) += the rows of dout (N, C).
  virtual void token_embedding_backward(float* dwte, const float* dout, const int32_t* tokens,
                                        int64_t N, int64_t C, int64_t vocab_begin,
                                        int64_t vocab_end) const = 0;
  static KernelCalls token_embedding_backward_cost(int64_t N, int64_t C);
  // out (B, T, C) += wpe rows pos0 .. pos0 + T.
  virtual void position_embedding_forward(float* out, const float* wpe, int64_t B, int64_t T,
                                          int64_t C, int64_t pos0) const = 0;
  static KernelCalls position_embedding_forward_cost(int64_t B, int64_t T, int64_t C);
  // dwpe (T, C) += dout (B, T, C) summed over B.
  virtual void position_embedding_backward(float* dwpe, const float* dout, int64_t B, int64_t T,
                                           int64_t C) const = 0;
  static KernelCalls position_embedding_backward_cost(int64_t B, int64_t T, int64_t C);

  // ---- cross-entropy over logits (N, V) fp32; losses, lse (N); targets (N),
  // < 0 ignored ----
  // The whole vocabulary on this rank (a target >= V is an error).
  virtual void cross_entropy_forward(float* losses, float* lse, const float* logits,
                                     const int32_t* targets, int64_t N, int64_t V) const = 0;
  static KernelCalls cross_entropy_forward_cost(int64_t N, int64_t V);
  // dlogits (N, V) = dloss * (softmax - onehot(target - vocab_begin)) of
  // this rank's V columns [vocab_begin, vocab_begin + V) of the vocabulary
  // (the whole of it: vocab_begin 0, every target < V). fp32 (may alias
  // logits) or bf16 / fp16 (a buffer of its own: it feeds the LM head's
  // GEMMs).
  virtual void cross_entropy_backward(Act dlogits, const float* logits, const float* lse,
                                      const int32_t* targets, float dloss, int64_t N, int64_t V,
                                      int64_t vocab_begin) const = 0;
  static KernelCalls cross_entropy_backward_cost(Precision dlogits, int64_t N, int64_t V);
  // Vocab-parallel forward, the local steps between the tp reductions:
  // row_max (N) of this rank's logits (N, V); then sums (2, N) = [sum of
  // exp(x - row_max) | the target's logit, 0 off this rank]; then, after
  // both are summed over tp, losses and lse (N).
  virtual void vp_xent_local_max(float* row_max, const float* logits, int64_t N,
                                 int64_t V) const = 0;
  static KernelCalls vp_xent_local_max_cost(int64_t N, int64_t V);
  virtual void vp_xent_local_sums(float* sums, const float* logits, const float* row_max,
                                  const int32_t* targets, int64_t N, int64_t V,
                                  int64_t vocab_begin) const = 0;
  static KernelCalls vp_xent_local_sums_cost(int64_t N, int64_t V);
  virtual void vp_xent_finish(float* losses, float* lse, const float* row_max, const float* sums,
                              const int32_t* targets, int64_t N) const = 0;
  static KernelCalls vp_xent_finish_cost(int64_t N);

  // ---- optimizer ----
  // AdamW over params, grads, m, v (n) fp32: grads are scaled, used and
  // zeroed in the same pass. working (n): null, or the bf16 / fp16 working
  // copy of params, written from the updated values in the same pass.
  virtual void adamw_update(float* params, float* grads, float* m, float* v, int64_t n,
                            const AdamWArgs& args, Act working) const = 0;
  static KernelCalls adamw_update_cost(Precision working, int64_t n);
  // The sum of x (n)^2 in double, the same bits for any thread count (the
  // global gradient norm).
  virtual double sum_squares(const float* x, int64_t n) const = 0;
  static KernelCalls sum_squares_cost(int64_t n);

  // Whether some method's cost reports calls named `kernel` ("gelu_forward",
  // "matmul_backward.dbias"): the names a calibrated system file prices.
  static bool reports_call(std::string_view kernel);
};

}  // namespace tessera::kernels

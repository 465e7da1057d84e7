// The CPU backend: kernels::Backend over the raw kernels of kernels/cpu/,
// one line per op: the same functions the model called before the seam, so
// results are bit-identical. Not final: a backend that runs only some ops
// elsewhere (or a test that watches the calls) derives from it and
// overrides those.
#pragma once
#include "tessera/kernels/backend.h"
#include "tessera/kernels/cpu/attention.h"
#include "tessera/kernels/cpu/dropout.h"
#include "tessera/kernels/cpu/bias.h"
#include "tessera/kernels/cpu/cross_entropy.h"
#include "tessera/kernels/cpu/cross_entropy_vocab_parallel.h"
#include "tessera/kernels/cpu/elementwise.h"
#include "tessera/kernels/cpu/embedding.h"
#include "tessera/kernels/cpu/gelu.h"
#include "tessera/kernels/cpu/layernorm.h"
#include "tessera/kernels/cpu/cast.h"
#include "tessera/kernels/cpu/matmul.h"
#include "tessera/kernels/cpu/matmul_lowp.h"
#include "tessera/kernels/cpu/rmsnorm.h"
#include "tessera/kernels/cpu/rope.h"
#include "tessera/kernels/cpu/swiglu.h"

namespace tessera::kernels {

class CpuBackend : public Backend {
 public:
  const char* name() const override { return "cpu"; }

  void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                      int64_t N, int64_t C, int64_t OC) const override {
    cpu::matmul_forward(out, inp, weight, bias, N, C, OC);
  }
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, int64_t N, int64_t C, int64_t OC,
                       bool accumulate_dinp, bool accumulate_dweight) const override {
    cpu::matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, accumulate_dinp,
                         accumulate_dweight);
  }
  void matmul_forward_bf16(float* out, const bf16_t* inp, const bf16_t* weight, const float* bias,
                           int64_t N, int64_t C, int64_t OC) const override {
    cpu::matmul_forward_bf16(out, inp, weight, bias, N, C, OC);
  }
  void matmul_backward_bf16(float* dinp, float* dweight, float* dbias, const bf16_t* dout,
                            const bf16_t* inp, const bf16_t* weight, int64_t N, int64_t C,
                            int64_t OC, bool accumulate_dinp,
                            bool accumulate_dweight) const override {
    cpu::matmul_backward_bf16(dinp, dweight, dbias, dout, inp, weight, N, C, OC, accumulate_dinp,
                              accumulate_dweight);
  }
  void matmul_forward_fp16(float* out, const fp16_t* inp, const fp16_t* weight, const float* bias,
                           int64_t N, int64_t C, int64_t OC) const override {
    cpu::matmul_forward_fp16(out, inp, weight, bias, N, C, OC);
  }
  void matmul_backward_fp16(float* dinp, float* dweight, float* dbias, const fp16_t* dout,
                            const fp16_t* inp, const fp16_t* weight, int64_t N, int64_t C,
                            int64_t OC, bool accumulate_dinp,
                            bool accumulate_dweight) const override {
    cpu::matmul_backward_fp16(dinp, dweight, dbias, dout, inp, weight, N, C, OC, accumulate_dinp,
                              accumulate_dweight);
  }
  void matmul_forward_bf16_out(bf16_t* out, const bf16_t* inp, const bf16_t* weight,
                               const float* bias, int64_t N, int64_t C,
                               int64_t OC) const override {
    cpu::matmul_forward_bf16_out(out, inp, weight, bias, N, C, OC);
  }
  void matmul_forward_fp16_out(fp16_t* out, const fp16_t* inp, const fp16_t* weight,
                               const float* bias, int64_t N, int64_t C,
                               int64_t OC) const override {
    cpu::matmul_forward_fp16_out(out, inp, weight, bias, N, C, OC);
  }
  void cast_to_bf16(bf16_t* out, const float* in, int64_t n) const override {
    cpu::cast_fp32_to_bf16(out, in, n);
  }
  void cast_to_fp16(fp16_t* out, const float* in, int64_t n) const override {
    cpu::cast_fp32_to_fp16(out, in, n);
  }
  void bias_add(float* out, const float* bias, int64_t N, int64_t C) const override {
    cpu::bias_add(out, bias, N, C);
  }

  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, int64_t N,
                         int64_t C) const override {
    cpu::layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
  }
  void layernorm_forward_bf16(bf16_t* out, float* mean, float* rstd, const float* inp,
                              const float* weight, const float* bias, int64_t N,
                              int64_t C) const override {
    cpu::layernorm_forward_bf16(out, mean, rstd, inp, weight, bias, N, C);
  }
  void layernorm_forward_fp16(fp16_t* out, float* mean, float* rstd, const float* inp,
                              const float* weight, const float* bias, int64_t N,
                              int64_t C) const override {
    cpu::layernorm_forward_fp16(out, mean, rstd, inp, weight, bias, N, C);
  }
  void residual_layernorm_forward(float* out, float* mean, float* rstd, float* res,
                                  const float* addend, const float* weight, const float* bias,
                                  int64_t N, int64_t C) const override {
    cpu::residual_layernorm_forward(out, mean, rstd, res, addend, weight, bias, N, C);
  }
  void residual_layernorm_forward_bf16(bf16_t* out, float* mean, float* rstd, float* res,
                                       const float* addend, const float* weight,
                                       const float* bias, int64_t N, int64_t C) const override {
    cpu::residual_layernorm_forward_bf16(out, mean, rstd, res, addend, weight, bias, N, C);
  }
  void residual_layernorm_forward_fp16(fp16_t* out, float* mean, float* rstd, float* res,
                                       const float* addend, const float* weight,
                                       const float* bias, int64_t N, int64_t C) const override {
    cpu::residual_layernorm_forward_fp16(out, mean, rstd, res, addend, weight, bias, N, C);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, const float* mean,
                          const float* rstd, int64_t N, int64_t C) const override {
    cpu::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }

  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t N,
                       int64_t C, float eps) const override {
    cpu::rmsnorm_forward(out, rstd, inp, weight, N, C, eps);
  }
  void rmsnorm_forward_bf16(bf16_t* out, float* rstd, const float* inp, const float* weight,
                            int64_t N, int64_t C, float eps) const override {
    cpu::rmsnorm_forward_bf16(out, rstd, inp, weight, N, C, eps);
  }
  void rmsnorm_forward_fp16(fp16_t* out, float* rstd, const float* inp, const float* weight,
                            int64_t N, int64_t C, float eps) const override {
    cpu::rmsnorm_forward_fp16(out, rstd, inp, weight, N, C, eps);
  }
  void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                        const float* weight, const float* rstd, int64_t N,
                        int64_t C) const override {
    cpu::rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C);
  }

  void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T,
                         const AttentionHeads& heads, const DropoutSite* drop) const override {
    cpu::attention_forward(out, lse, qkv, B, T, heads, drop);
  }
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                          const float* lse, int64_t B, int64_t T, const AttentionHeads& heads,
                          const DropoutSite* drop) const override {
    cpu::attention_backward(dqkv, dout, qkv, out, lse, B, T, heads, drop);
  }
  void attention_forward_bf16(bf16_t* out, float* lse, const bf16_t* qkv, int64_t B, int64_t T,
                              const AttentionHeads& heads, const DropoutSite* drop) const override {
    cpu::attention_forward_bf16(out, lse, qkv, B, T, heads, drop);
  }
  void attention_forward_fp16(fp16_t* out, float* lse, const fp16_t* qkv, int64_t B, int64_t T,
                              const AttentionHeads& heads, const DropoutSite* drop) const override {
    cpu::attention_forward_fp16(out, lse, qkv, B, T, heads, drop);
  }
  void attention_backward_bf16(bf16_t* dqkv, const float* dout, const bf16_t* qkv,
                               const bf16_t* out, const float* lse, int64_t B, int64_t T,
                               const AttentionHeads& heads,
                               const DropoutSite* drop) const override {
    cpu::attention_backward_bf16(dqkv, dout, qkv, out, lse, B, T, heads, drop);
  }
  void attention_backward_fp16(fp16_t* dqkv, const float* dout, const fp16_t* qkv,
                               const fp16_t* out, const float* lse, int64_t B, int64_t T,
                               const AttentionHeads& heads,
                               const DropoutSite* drop) const override {
    cpu::attention_backward_fp16(dqkv, dout, qkv, out, lse, B, T, heads, drop);
  }
  void attention_decode(float* out, const float* q, const float* k_cache, const float* v_cache,
                        int64_t len, const AttentionHeads& heads) const override {
    cpu::attention_decode(out, q, k_cache, v_cache, len, heads);
  }
  void rope_rows(float* x, int64_t rows, int64_t stride, int64_t heads, int64_t HS, int64_t pos0,
                 float base) const override {
    cpu::rope_rows(x, rows, stride, heads, HS, pos0, base);
  }

  void dropout_rows(float* x, int64_t rows, int64_t C, int64_t row0, int64_t T,
                    const DropoutSite& site) const override {
    cpu::dropout_rows(x, rows, C, row0, T, site);
  }

  void gelu_forward(float* out, const float* inp, int64_t n) const override {
    cpu::gelu_forward(out, inp, n);
  }
  void bias_gelu_forward(float* out, float* pre, const float* bias, int64_t N,
                         int64_t C) const override {
    cpu::bias_gelu_forward(out, pre, bias, N, C);
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) const override {
    cpu::gelu_backward(dinp, inp, dout, n);
  }

  void gelu_forward_bf16(bf16_t* out, const bf16_t* inp, int64_t n) const override {
    cpu::gelu_forward_bf16(out, inp, n);
  }
  void gelu_forward_fp16(fp16_t* out, const fp16_t* inp, int64_t n) const override {
    cpu::gelu_forward_fp16(out, inp, n);
  }
  void gelu_backward_bf16(bf16_t* dinp, const bf16_t* inp, const float* dout,
                          int64_t n) const override {
    cpu::gelu_backward_bf16(dinp, inp, dout, n);
  }
  void gelu_backward_fp16(fp16_t* dinp, const fp16_t* inp, const float* dout,
                          int64_t n) const override {
    cpu::gelu_backward_fp16(dinp, inp, dout, n);
  }

  void swiglu_forward(float* out, const float* inp, int64_t N, int64_t F) const override {
    cpu::swiglu_forward(out, inp, N, F);
  }
  void swiglu_backward(float* dinp, const float* inp, const float* dout, int64_t N,
                       int64_t F) const override {
    cpu::swiglu_backward(dinp, inp, dout, N, F);
  }
  void swiglu_forward_bf16(bf16_t* out, const bf16_t* inp, int64_t N, int64_t F) const override {
    cpu::swiglu_forward_bf16(out, inp, N, F);
  }
  void swiglu_forward_fp16(fp16_t* out, const fp16_t* inp, int64_t N, int64_t F) const override {
    cpu::swiglu_forward_fp16(out, inp, N, F);
  }
  void swiglu_backward_bf16(bf16_t* dinp, const bf16_t* inp, const float* dout, int64_t N,
                            int64_t F) const override {
    cpu::swiglu_backward_bf16(dinp, inp, dout, N, F);
  }
  void swiglu_backward_fp16(fp16_t* dinp, const fp16_t* inp, const float* dout, int64_t N,
                            int64_t F) const override {
    cpu::swiglu_backward_fp16(dinp, inp, dout, N, F);
  }

  void add(float* out, const float* a, const float* b, int64_t n) const override {
    cpu::add(out, a, b, n);
  }
  void accumulate(float* y, const float* x, int64_t n) const override { cpu::accumulate(y, x, n); }

  void token_embedding_forward(float* out, const int32_t* tokens, const float* wte, int64_t N,
                               int64_t C, int64_t vocab_begin, int64_t vocab_end) const override {
    cpu::token_embedding_forward(out, tokens, wte, N, C, vocab_begin, vocab_end);
  }
  void token_embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int64_t N,
                                int64_t C, int64_t vocab_begin,
                                int64_t vocab_end) const override {
    cpu::token_embedding_backward(dwte, dout, tokens, N, C, vocab_begin, vocab_end);
  }
  void position_embedding_forward(float* out, const float* wpe, int64_t B, int64_t T, int64_t C,
                                  int64_t pos0) const override {
    cpu::position_embedding_forward(out, wpe, B, T, C, pos0);
  }
  void position_embedding_backward(float* dwpe, const float* dout, int64_t B, int64_t T,
                                   int64_t C) const override {
    cpu::position_embedding_backward(dwpe, dout, B, T, C);
  }

  void cross_entropy_forward(float* losses, float* lse, const float* logits,
                             const int32_t* targets, int64_t N, int64_t V) const override {
    cpu::cross_entropy_forward(losses, lse, logits, targets, N, V);
  }
  void cross_entropy_backward(float* dlogits, const float* logits, const float* lse,
                              const int32_t* targets, float dloss, int64_t N,
                              int64_t V) const override {
    cpu::cross_entropy_backward(dlogits, logits, lse, targets, dloss, N, V);
  }
  void cross_entropy_backward_bf16(bf16_t* dlogits, const float* logits, const float* lse,
                                   const int32_t* targets, float dloss, int64_t N,
                                   int64_t V) const override {
    cpu::cross_entropy_backward_bf16(dlogits, logits, lse, targets, dloss, N, V);
  }
  void cross_entropy_backward_fp16(fp16_t* dlogits, const float* logits, const float* lse,
                                   const int32_t* targets, float dloss, int64_t N,
                                   int64_t V) const override {
    cpu::cross_entropy_backward_fp16(dlogits, logits, lse, targets, dloss, N, V);
  }
  void vp_xent_local_max(float* row_max, const float* logits, int64_t N,
                         int64_t V) const override {
    cpu::vp_xent_local_max(row_max, logits, N, V);
  }
  void vp_xent_local_sums(float* sums, const float* logits, const float* row_max,
                          const int32_t* targets, int64_t N, int64_t V,
                          int64_t vocab_begin) const override {
    cpu::vp_xent_local_sums(sums, logits, row_max, targets, N, V, vocab_begin);
  }
  void vp_xent_finish(float* losses, float* lse, const float* row_max, const float* sums,
                      const int32_t* targets, int64_t N) const override {
    cpu::vp_xent_finish(losses, lse, row_max, sums, targets, N);
  }
  void vp_xent_backward(float* dlogits, const float* logits, const float* lse,
                        const int32_t* targets, float dloss, int64_t N, int64_t V,
                        int64_t vocab_begin) const override {
    cpu::vp_xent_backward(dlogits, logits, lse, targets, dloss, N, V, vocab_begin);
  }
  void vp_xent_backward_bf16(bf16_t* dlogits, const float* logits, const float* lse,
                             const int32_t* targets, float dloss, int64_t N, int64_t V,
                             int64_t vocab_begin) const override {
    cpu::vp_xent_backward_bf16(dlogits, logits, lse, targets, dloss, N, V, vocab_begin);
  }
  void vp_xent_backward_fp16(fp16_t* dlogits, const float* logits, const float* lse,
                             const int32_t* targets, float dloss, int64_t N, int64_t V,
                             int64_t vocab_begin) const override {
    cpu::vp_xent_backward_fp16(dlogits, logits, lse, targets, dloss, N, V, vocab_begin);
  }
};

// The process-wide CPU backend (stateless; the kernels share OpenMP's pool).
const Backend& cpu_backend();

}  // namespace tessera::kernels

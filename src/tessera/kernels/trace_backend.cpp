#include "tessera/kernels/trace_backend.h"

namespace tessera::kernels {

TraceBackend::Timed TraceBackend::record(const KernelCalls& calls, const void* key) const {
  for (KernelCall k : calls) {
    k.key = key;
    sink_(k);
  }
  return Timed(*this, calls);
}

void TraceBackend::matmul_forward(Act out, ConstAct inp, ConstAct weight, const float* bias,
                                  int64_t N, int64_t C, int64_t OC) const {
  const Timed timed = record(matmul_forward_cost(inp.dtype, out.dtype, bias != nullptr, N, C, OC), weight.p);
  if (inner_) inner_->matmul_forward(out, inp, weight, bias, N, C, OC);
}

void TraceBackend::matmul_backward(float* dinp, float* dweight, float* dbias, ConstAct dout,
                                   ConstAct inp, ConstAct weight, int64_t N, int64_t C,
                                   int64_t OC, bool accumulate_dinp,
                                   bool accumulate_dweight) const {
  const Timed timed = record(matmul_backward_cost(dout.dtype, dinp != nullptr, dweight != nullptr, dbias != nullptr,
                              N, C, OC),
         weight.p);
  if (inner_)
    inner_->matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, accumulate_dinp,
                            accumulate_dweight);
}

void TraceBackend::cast(Act out, ConstAct in, int64_t n) const {
  const Timed timed = record(cast_cost(out.dtype, in.dtype, n));
  if (inner_) inner_->cast(out, in, n);
}

void TraceBackend::fill(Act x, float value, int64_t n) const {
  const Timed timed = record(fill_cost(x.dtype, n), x.p);
  if (inner_) inner_->fill(x, value, n);
}

void TraceBackend::accumulate(float* y, ConstAct x, int64_t n) const {
  const Timed timed = record(accumulate_cost(x.dtype, n), y);
  if (inner_) inner_->accumulate(y, x, n);
}

void TraceBackend::bias_add(float* out, const float* bias, int64_t N, int64_t C,
                            float* gelu_out) const {
  const Timed timed = record(bias_add_cost(gelu_out != nullptr, N, C), bias);
  if (inner_) inner_->bias_add(out, bias, N, C, gelu_out);
}

void TraceBackend::layernorm_forward(Act out, float* mean, float* rstd, const float* inp,
                                     float* res, const float* weight, const float* bias,
                                     int64_t N, int64_t C) const {
  const Timed timed = record(layernorm_forward_cost(out.dtype, res != nullptr, N, C), weight);
  if (inner_) inner_->layernorm_forward(out, mean, rstd, inp, res, weight, bias, N, C);
}

void TraceBackend::layernorm_backward(float* dinp, float* dweight, float* dbias,
                                      const float* dout, const float* inp, const float* weight,
                                      const float* mean, const float* rstd, int64_t N,
                                      int64_t C) const {
  const Timed timed = record(layernorm_backward_cost(N, C), weight);
  if (inner_)
    inner_->layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

void TraceBackend::rmsnorm_forward(Act out, float* rstd, const float* inp, const float* weight,
                                   int64_t N, int64_t C, float eps) const {
  const Timed timed = record(rmsnorm_forward_cost(out.dtype, N, C), weight);
  if (inner_) inner_->rmsnorm_forward(out, rstd, inp, weight, N, C, eps);
}

void TraceBackend::rmsnorm_backward(float* dinp, float* dweight, const float* dout,
                                    const float* inp, const float* weight, const float* rstd,
                                    int64_t N, int64_t C) const {
  const Timed timed = record(rmsnorm_backward_cost(N, C), weight);
  if (inner_) inner_->rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C);
}

void TraceBackend::attention_forward(Act out, float* lse, ConstAct qkv, int64_t B, int64_t T,
                                     const AttentionHeads& heads, const DropoutSite* drop) const {
  const Timed timed = record(attention_forward_cost(qkv.dtype, B, T, heads, drop));
  if (inner_) inner_->attention_forward(out, lse, qkv, B, T, heads, drop);
}

void TraceBackend::attention_backward(Act dqkv, const float* dout, ConstAct qkv, ConstAct out,
                                      const float* lse, int64_t B, int64_t T,
                                      const AttentionHeads& heads,
                                      const DropoutSite* drop) const {
  const Timed timed = record(attention_backward_cost(qkv.dtype, B, T, heads, drop));
  if (inner_) inner_->attention_backward(dqkv, dout, qkv, out, lse, B, T, heads, drop);
}

void TraceBackend::attention_decode(float* out, const float* q, const float* k_cache,
                                    const float* v_cache, int64_t len,
                                    const AttentionHeads& heads) const {
  const Timed timed = record(attention_decode_cost(len, heads));
  if (inner_) inner_->attention_decode(out, q, k_cache, v_cache, len, heads);
}

void TraceBackend::rope_rows(float* x, int64_t rows, int64_t stride, int64_t heads, int64_t HS,
                             int64_t pos0, float base) const {
  const Timed timed = record(rope_rows_cost(rows, heads, HS));
  if (inner_) inner_->rope_rows(x, rows, stride, heads, HS, pos0, base);
}

void TraceBackend::gelu_forward(Act out, ConstAct inp, int64_t n) const {
  const Timed timed = record(gelu_forward_cost(inp.dtype, n));
  if (inner_) inner_->gelu_forward(out, inp, n);
}

void TraceBackend::gelu_backward(Act dinp, ConstAct inp, const float* dout, int64_t n) const {
  const Timed timed = record(gelu_backward_cost(inp.dtype, n));
  if (inner_) inner_->gelu_backward(dinp, inp, dout, n);
}

void TraceBackend::swiglu_forward(Act out, ConstAct inp, int64_t N, int64_t F) const {
  const Timed timed = record(swiglu_forward_cost(inp.dtype, N, F));
  if (inner_) inner_->swiglu_forward(out, inp, N, F);
}

void TraceBackend::swiglu_backward(Act dinp, ConstAct inp, const float* dout, int64_t N,
                                   int64_t F) const {
  const Timed timed = record(swiglu_backward_cost(inp.dtype, N, F));
  if (inner_) inner_->swiglu_backward(dinp, inp, dout, N, F);
}

void TraceBackend::dropout_rows(float* x, int64_t rows, int64_t C, int64_t row0, int64_t T,
                                const DropoutSite& site) const {
  const Timed timed = record(dropout_rows_cost(rows, C));
  if (inner_) inner_->dropout_rows(x, rows, C, row0, T, site);
}

void TraceBackend::token_embedding_forward(float* out, const int32_t* tokens, const float* wte,
                                           int64_t N, int64_t C, int64_t vocab_begin,
                                           int64_t vocab_end) const {
  const Timed timed = record(token_embedding_forward_cost(N, C), wte);
  if (inner_) inner_->token_embedding_forward(out, tokens, wte, N, C, vocab_begin, vocab_end);
}

void TraceBackend::token_embedding_backward(float* dwte, const float* dout,
                                            const int32_t* tokens, int64_t N, int64_t C,
                                            int64_t vocab_begin, int64_t vocab_end) const {
  const Timed timed = record(token_embedding_backward_cost(N, C), dwte);
  if (inner_) inner_->token_embedding_backward(dwte, dout, tokens, N, C, vocab_begin, vocab_end);
}

void TraceBackend::position_embedding_forward(float* out, const float* wpe, int64_t B, int64_t T,
                                              int64_t C, int64_t pos0) const {
  const Timed timed = record(position_embedding_forward_cost(B, T, C), wpe);
  if (inner_) inner_->position_embedding_forward(out, wpe, B, T, C, pos0);
}

void TraceBackend::position_embedding_backward(float* dwpe, const float* dout, int64_t B,
                                               int64_t T, int64_t C) const {
  const Timed timed = record(position_embedding_backward_cost(B, T, C), dwpe);
  if (inner_) inner_->position_embedding_backward(dwpe, dout, B, T, C);
}

void TraceBackend::cross_entropy_forward(float* losses, float* lse, const float* logits,
                                         const int32_t* targets, int64_t N, int64_t V) const {
  const Timed timed = record(cross_entropy_forward_cost(N, V));
  if (inner_) inner_->cross_entropy_forward(losses, lse, logits, targets, N, V);
}

void TraceBackend::cross_entropy_backward(Act dlogits, const float* logits, const float* lse,
                                          const int32_t* targets, float dloss, int64_t N,
                                          int64_t V, int64_t vocab_begin) const {
  const Timed timed = record(cross_entropy_backward_cost(dlogits.dtype, N, V));
  if (inner_)
    inner_->cross_entropy_backward(dlogits, logits, lse, targets, dloss, N, V, vocab_begin);
}

void TraceBackend::vp_xent_local_max(float* row_max, const float* logits, int64_t N,
                                     int64_t V) const {
  const Timed timed = record(vp_xent_local_max_cost(N, V));
  if (inner_) inner_->vp_xent_local_max(row_max, logits, N, V);
}

void TraceBackend::vp_xent_local_sums(float* sums, const float* logits, const float* row_max,
                                      const int32_t* targets, int64_t N, int64_t V,
                                      int64_t vocab_begin) const {
  const Timed timed = record(vp_xent_local_sums_cost(N, V));
  if (inner_) inner_->vp_xent_local_sums(sums, logits, row_max, targets, N, V, vocab_begin);
}

void TraceBackend::vp_xent_finish(float* losses, float* lse, const float* row_max,
                                  const float* sums, const int32_t* targets, int64_t N) const {
  const Timed timed = record(vp_xent_finish_cost(N));
  if (inner_) inner_->vp_xent_finish(losses, lse, row_max, sums, targets, N);
}

void TraceBackend::adamw_update(float* params, float* grads, float* m, float* v, int64_t n,
                                const AdamWArgs& args, Act working) const {
  const Timed timed = record(adamw_update_cost(working ? working.dtype : Precision::Fp32, n), params);
  if (inner_) inner_->adamw_update(params, grads, m, v, n, args, working);
}

double TraceBackend::sum_squares(const float* x, int64_t n) const {
  const Timed timed = record(sum_squares_cost(n));
  return inner_ ? inner_->sum_squares(x, n) : 0.0;
}

}  // namespace tessera::kernels

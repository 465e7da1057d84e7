// CpuBackend: each Backend method reads its views' dtype tags and calls the
// cpu:: kernel for that combination, one line per case.
#include "tessera/kernels/cpu/cpu_backend.h"

#include <initializer_list>

#include "tessera/core/error.h"
#include "tessera/kernels/cpu/adamw.h"
#include "tessera/kernels/cpu/attention.h"
#include "tessera/kernels/cpu/bias.h"
#include "tessera/kernels/cpu/cast.h"
#include "tessera/kernels/cpu/cross_entropy.h"
#include "tessera/kernels/cpu/cross_entropy_vocab_parallel.h"
#include "tessera/kernels/cpu/dropout.h"
#include "tessera/kernels/cpu/elementwise.h"
#include "tessera/kernels/cpu/embedding.h"
#include "tessera/kernels/cpu/gelu.h"
#include "tessera/kernels/cpu/layernorm.h"
#include "tessera/kernels/cpu/matmul.h"
#include "tessera/kernels/cpu/matmul_lowp.h"
#include "tessera/kernels/cpu/rmsnorm.h"
#include "tessera/kernels/cpu/rope.h"
#include "tessera/kernels/cpu/swiglu.h"

namespace tessera::kernels {

namespace {

// The one type of a kernel's tagged views (all of them alike), or the error
// that names the kernel and the types it was given.
Precision one_type(const char* kernel, std::initializer_list<Precision> types) {
  const Precision t = *types.begin();
  for (Precision u : types)
    TESSERA_CHECK(u == t, "cpu backend: {} has no kernel for views of {} and {}", kernel,
                  precision_name(t), precision_name(u));
  return t;
}

void expect_type(const char* kernel, Precision got, Precision want) {
  TESSERA_CHECK(got == want, "cpu backend: {} has no kernel for a {} view here (wants {})",
                kernel, precision_name(got), precision_name(want));
}

// Views are fp32 or 16-bit (kernels/precision.h): fp64 is only a
// collective's scalar type, never a kernel's.
[[noreturn]] void refuse_fp64(const char* kernel) {
  fail("cpu backend: {} has no fp64 kernel", kernel);
}

}  // namespace

void CpuBackend::matmul_forward(Act out, ConstAct inp, ConstAct weight, const float* bias,
                                int64_t N, int64_t C, int64_t OC) const {
  const Precision in = one_type("matmul_forward", {inp.dtype, weight.dtype});
  if (in == Precision::Fp32) {
    expect_type("matmul_forward", out.dtype, Precision::Fp32);
    return cpu::matmul_forward(out.f32(), inp.f32(), weight.f32(), bias, N, C, OC);
  }
  const bool bf16 = in == Precision::Bf16;
  if (!out.lowp())
    return (bf16 ? cpu::matmul_forward_bf16 : cpu::matmul_forward_fp16)(
        out.f32(), inp.u16(), weight.u16(), bias, N, C, OC);
  expect_type("matmul_forward", out.dtype, in);
  (bf16 ? cpu::matmul_forward_bf16_out : cpu::matmul_forward_fp16_out)(
      out.u16(), inp.u16(), weight.u16(), bias, N, C, OC);
}

void CpuBackend::matmul_backward(float* dinp, float* dweight, float* dbias, ConstAct dout,
                                 ConstAct inp, ConstAct weight, int64_t N, int64_t C, int64_t OC,
                                 bool accumulate_dinp, bool accumulate_dweight) const {
  switch (one_type("matmul_backward", {dout.dtype, inp.dtype, weight.dtype})) {
    case Precision::Fp32:
      return cpu::matmul_backward(dinp, dweight, dbias, dout.f32(), inp.f32(), weight.f32(), N,
                                  C, OC, accumulate_dinp, accumulate_dweight);
    case Precision::Bf16:
      return cpu::matmul_backward_bf16(dinp, dweight, dbias, dout.u16(), inp.u16(), weight.u16(),
                                       N, C, OC, accumulate_dinp, accumulate_dweight);
    case Precision::Fp16:
      return cpu::matmul_backward_fp16(dinp, dweight, dbias, dout.u16(), inp.u16(), weight.u16(),
                                       N, C, OC, accumulate_dinp, accumulate_dweight);
    case Precision::Fp64: refuse_fp64(__func__);
  }
}

void CpuBackend::cast(Act out, ConstAct in, int64_t n) const {
  if (out.dtype == in.dtype) return cpu::copy_bytes(out.p, in.p, n * int64_t(dtype_size(in.dtype)));
  if (!in.lowp()) {  // fp32 -> 16 bits, rounded to nearest even
    if (out.dtype == Precision::Bf16) return cpu::cast_fp32_to_bf16(out.u16(), in.f32(), n);
    return cpu::cast_fp32_to_fp16(out.u16(), in.f32(), n);
  }
  expect_type("cast", out.dtype, Precision::Fp32);  // 16 bits -> fp32, exact
  if (in.dtype == Precision::Bf16) return cpu::cast_bf16_to_fp32(out.f32(), in.u16(), n);
  cpu::cast_fp16_to_fp32(out.f32(), in.u16(), n);
}

void CpuBackend::fill(Act x, float value, int64_t n) const {
  switch (x.dtype) {
    case Precision::Fp32: return cpu::fill(x.f32(), value, n);
    case Precision::Bf16: return cpu::fill_u16(x.u16(), cpu::fp32_to_bf16(value), n);
    case Precision::Fp16: return cpu::fill_u16(x.u16(), cpu::fp32_to_fp16(value), n);
    case Precision::Fp64: refuse_fp64(__func__);
  }
}

void CpuBackend::accumulate(float* y, ConstAct x, int64_t n) const {
  switch (x.dtype) {
    case Precision::Fp32: return cpu::accumulate(y, x.f32(), n);
    case Precision::Bf16: return cpu::accumulate_bf16(y, x.u16(), n);
    case Precision::Fp16: return cpu::accumulate_fp16(y, x.u16(), n);
    case Precision::Fp64: refuse_fp64(__func__);
  }
}

void CpuBackend::bias_add(float* out, const float* bias, int64_t N, int64_t C,
                          float* gelu_out) const {
  if (gelu_out) return cpu::bias_gelu_forward(gelu_out, out, bias, N, C);
  cpu::bias_add(out, bias, N, C);
}

void CpuBackend::layernorm_forward(Act out, float* mean, float* rstd, const float* inp,
                                   float* res, const float* weight, const float* bias, int64_t N,
                                   int64_t C) const {
  if (res) {  // res += inp, then the norm of res
    switch (out.dtype) {
      case Precision::Fp32:
        return cpu::residual_layernorm_forward(out.f32(), mean, rstd, res, inp, weight, bias, N,
                                               C);
      case Precision::Bf16:
        return cpu::residual_layernorm_forward_bf16(out.u16(), mean, rstd, res, inp, weight,
                                                    bias, N, C);
      case Precision::Fp16:
        return cpu::residual_layernorm_forward_fp16(out.u16(), mean, rstd, res, inp, weight,
                                                    bias, N, C);
      case Precision::Fp64: refuse_fp64(__func__);
    }
  }
  switch (out.dtype) {
    case Precision::Fp32:
      return cpu::layernorm_forward(out.f32(), mean, rstd, inp, weight, bias, N, C);
    case Precision::Bf16:
      return cpu::layernorm_forward_bf16(out.u16(), mean, rstd, inp, weight, bias, N, C);
    case Precision::Fp16:
      return cpu::layernorm_forward_fp16(out.u16(), mean, rstd, inp, weight, bias, N, C);
    case Precision::Fp64: refuse_fp64(__func__);
  }
}

void CpuBackend::layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                    const float* inp, const float* weight, const float* mean,
                                    const float* rstd, int64_t N, int64_t C) const {
  cpu::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

void CpuBackend::rmsnorm_forward(Act out, float* rstd, const float* inp, const float* weight,
                                 int64_t N, int64_t C, float eps) const {
  switch (out.dtype) {
    case Precision::Fp32: return cpu::rmsnorm_forward(out.f32(), rstd, inp, weight, N, C, eps);
    case Precision::Bf16:
      return cpu::rmsnorm_forward_bf16(out.u16(), rstd, inp, weight, N, C, eps);
    case Precision::Fp16:
      return cpu::rmsnorm_forward_fp16(out.u16(), rstd, inp, weight, N, C, eps);
    case Precision::Fp64: refuse_fp64(__func__);
  }
}

void CpuBackend::rmsnorm_backward(float* dinp, float* dweight, const float* dout,
                                  const float* inp, const float* weight, const float* rstd,
                                  int64_t N, int64_t C) const {
  cpu::rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C);
}

void CpuBackend::attention_forward(Act out, float* lse, ConstAct qkv, int64_t B, int64_t T,
                                   const AttentionHeads& heads, const DropoutSite* drop) const {
  switch (one_type("attention_forward", {out.dtype, qkv.dtype})) {
    case Precision::Fp32:
      return cpu::attention_forward(out.f32(), lse, qkv.f32(), B, T, heads, drop);
    case Precision::Bf16:
      return cpu::attention_forward_bf16(out.u16(), lse, qkv.u16(), B, T, heads, drop);
    case Precision::Fp16:
      return cpu::attention_forward_fp16(out.u16(), lse, qkv.u16(), B, T, heads, drop);
    case Precision::Fp64: refuse_fp64(__func__);
  }
}

void CpuBackend::attention_backward(Act dqkv, const float* dout, ConstAct qkv, ConstAct out,
                                    const float* lse, int64_t B, int64_t T,
                                    const AttentionHeads& heads, const DropoutSite* drop) const {
  switch (one_type("attention_backward", {dqkv.dtype, qkv.dtype, out.dtype})) {
    case Precision::Fp32:
      return cpu::attention_backward(dqkv.f32(), dout, qkv.f32(), out.f32(), lse, B, T, heads,
                                     drop);
    case Precision::Bf16:
      return cpu::attention_backward_bf16(dqkv.u16(), dout, qkv.u16(), out.u16(), lse, B, T,
                                          heads, drop);
    case Precision::Fp16:
      return cpu::attention_backward_fp16(dqkv.u16(), dout, qkv.u16(), out.u16(), lse, B, T,
                                          heads, drop);
    case Precision::Fp64: refuse_fp64(__func__);
  }
}

void CpuBackend::attention_decode(float* out, const float* q, const float* k_cache,
                                  const float* v_cache, int64_t len,
                                  const AttentionHeads& heads) const {
  cpu::attention_decode(out, q, k_cache, v_cache, len, heads);
}

void CpuBackend::rope_rows(float* x, int64_t rows, int64_t stride, int64_t heads, int64_t HS,
                           int64_t pos0, float base) const {
  cpu::rope_rows(x, rows, stride, heads, HS, pos0, base);
}

void CpuBackend::gelu_forward(Act out, ConstAct inp, int64_t n) const {
  switch (one_type("gelu_forward", {out.dtype, inp.dtype})) {
    case Precision::Fp32: return cpu::gelu_forward(out.f32(), inp.f32(), n);
    case Precision::Bf16: return cpu::gelu_forward_bf16(out.u16(), inp.u16(), n);
    case Precision::Fp16: return cpu::gelu_forward_fp16(out.u16(), inp.u16(), n);
    case Precision::Fp64: refuse_fp64(__func__);
  }
}

void CpuBackend::gelu_backward(Act dinp, ConstAct inp, const float* dout, int64_t n) const {
  switch (one_type("gelu_backward", {dinp.dtype, inp.dtype})) {
    case Precision::Fp32: return cpu::gelu_backward(dinp.f32(), inp.f32(), dout, n);
    case Precision::Bf16: return cpu::gelu_backward_bf16(dinp.u16(), inp.u16(), dout, n);
    case Precision::Fp16: return cpu::gelu_backward_fp16(dinp.u16(), inp.u16(), dout, n);
    case Precision::Fp64: refuse_fp64(__func__);
  }
}

void CpuBackend::swiglu_forward(Act out, ConstAct inp, int64_t N, int64_t F) const {
  switch (one_type("swiglu_forward", {out.dtype, inp.dtype})) {
    case Precision::Fp32: return cpu::swiglu_forward(out.f32(), inp.f32(), N, F);
    case Precision::Bf16: return cpu::swiglu_forward_bf16(out.u16(), inp.u16(), N, F);
    case Precision::Fp16: return cpu::swiglu_forward_fp16(out.u16(), inp.u16(), N, F);
    case Precision::Fp64: refuse_fp64(__func__);
  }
}

void CpuBackend::swiglu_backward(Act dinp, ConstAct inp, const float* dout, int64_t N,
                                 int64_t F) const {
  switch (one_type("swiglu_backward", {dinp.dtype, inp.dtype})) {
    case Precision::Fp32: return cpu::swiglu_backward(dinp.f32(), inp.f32(), dout, N, F);
    case Precision::Bf16: return cpu::swiglu_backward_bf16(dinp.u16(), inp.u16(), dout, N, F);
    case Precision::Fp16: return cpu::swiglu_backward_fp16(dinp.u16(), inp.u16(), dout, N, F);
    case Precision::Fp64: refuse_fp64(__func__);
  }
}

void CpuBackend::dropout_rows(float* x, int64_t rows, int64_t C, int64_t row0, int64_t T,
                              const DropoutSite& site) const {
  cpu::dropout_rows(x, rows, C, row0, T, site);
}

void CpuBackend::token_embedding_forward(float* out, const int32_t* tokens, const float* wte,
                                         int64_t N, int64_t C, int64_t vocab_begin,
                                         int64_t vocab_end) const {
  cpu::token_embedding_forward(out, tokens, wte, N, C, vocab_begin, vocab_end);
}

void CpuBackend::token_embedding_backward(float* dwte, const float* dout, const int32_t* tokens,
                                          int64_t N, int64_t C, int64_t vocab_begin,
                                          int64_t vocab_end) const {
  cpu::token_embedding_backward(dwte, dout, tokens, N, C, vocab_begin, vocab_end);
}

void CpuBackend::position_embedding_forward(float* out, const float* wpe, int64_t B, int64_t T,
                                            int64_t C, int64_t pos0) const {
  cpu::position_embedding_forward(out, wpe, B, T, C, pos0);
}

void CpuBackend::position_embedding_backward(float* dwpe, const float* dout, int64_t B,
                                             int64_t T, int64_t C) const {
  cpu::position_embedding_backward(dwpe, dout, B, T, C);
}

void CpuBackend::cross_entropy_forward(float* losses, float* lse, const float* logits,
                                       const int32_t* targets, int64_t N, int64_t V) const {
  cpu::cross_entropy_forward(losses, lse, logits, targets, N, V);
}

// The vocab-parallel kernel serves the whole vocabulary too (vocab_begin 0):
// a row whose target is in [0, V) gets the same xent_grad_row call, and an
// ignored row (< 0) the same zeros, as cpu::cross_entropy_backward gives,
// and a target >= V never reaches a backward (cross_entropy_forward
// rejects it). So one method, and the same bits.
void CpuBackend::cross_entropy_backward(Act dlogits, const float* logits, const float* lse,
                                        const int32_t* targets, float dloss, int64_t N,
                                        int64_t V, int64_t vocab_begin) const {
  switch (dlogits.dtype) {
    case Precision::Fp32:
      return cpu::vp_xent_backward(dlogits.f32(), logits, lse, targets, dloss, N, V,
                                   vocab_begin);
    case Precision::Bf16:
      return cpu::vp_xent_backward_bf16(dlogits.u16(), logits, lse, targets, dloss, N, V,
                                        vocab_begin);
    case Precision::Fp16:
      return cpu::vp_xent_backward_fp16(dlogits.u16(), logits, lse, targets, dloss, N, V,
                                        vocab_begin);
    case Precision::Fp64: refuse_fp64(__func__);
  }
}

void CpuBackend::vp_xent_local_max(float* row_max, const float* logits, int64_t N,
                                   int64_t V) const {
  cpu::vp_xent_local_max(row_max, logits, N, V);
}

void CpuBackend::vp_xent_local_sums(float* sums, const float* logits, const float* row_max,
                                    const int32_t* targets, int64_t N, int64_t V,
                                    int64_t vocab_begin) const {
  cpu::vp_xent_local_sums(sums, logits, row_max, targets, N, V, vocab_begin);
}

void CpuBackend::vp_xent_finish(float* losses, float* lse, const float* row_max,
                                const float* sums, const int32_t* targets, int64_t N) const {
  cpu::vp_xent_finish(losses, lse, row_max, sums, targets, N);
}

void CpuBackend::adamw_update(float* params, float* grads, float* m, float* v, int64_t n,
                              const AdamWArgs& args, Act working) const {
  if (!working) return cpu::adamw_update(params, grads, m, v, n, args);
  TESSERA_CHECK(working.lowp(), "cpu backend: adamw_update's working copy must be bf16 or fp16");
  cpu::adamw_update(params, grads, m, v, n, args, working.u16(), working.dtype);
}

double CpuBackend::sum_squares(const float* x, int64_t n) const {
  return cpu::sum_squares(x, n);
}

}  // namespace tessera::kernels

// The cost functions the entries of backend_methods.inc name: what a call
// moves and computes, from its shapes and element types alone. These are the engine's own kernels' figures (the CPU
// backend's; a backend whose kernels differ states its own) and what the
// planner prices: bytes of device memory each call reads and writes
// (every buffer once: the kernels stream them), the FLOPs of its matmuls,
// and the elements a memory-bound kernel is applied to (the unit of the
// planner's calibrated per-element times).
#include "tessera/kernels/backend.h"

#include <algorithm>

#include "tessera/kernels/call_cost.h"
#include "tessera/kernels/cpu_backend_info.h"

namespace tessera::kernels {

using namespace call_cost;  // the pieces every cost below is written in

namespace {

// The flash-style kernel: Q K^T and P V over the full T x T (model/flops.h's
// count), backward recomputing the scores (5 matmuls against 2: Dao et al.
// 2022); RoPE rotates q and k as they are loaded, 3 FLOPs an element (a
// pair (x1, x2) -> (x1 c - x2 s, x2 c + x1 s) is 6) over the NH + KVH heads,
// and backward rotates them again and rotates dq, dk back: twice that.
KernelCall attention(bool forward, Precision dtype, int64_t B, int64_t T,
                     const AttentionHeads& h, const DropoutSite* drop) {
  const int64_t Cl = h.q_width(), NH = h.q_heads;
  KernelCall c;
  c.kernel = forward ? "attention_forward" : "attention_backward";
  c.cls = CallClass::Attention;
  c.dtype = dtype;
  c.m = B, c.n = T, c.k = Cl, c.batch = NH;
  c.elements = B * T * Cl;
  const double fw = 4.0 * double(B) * double(T) * double(T) * double(Cl);
  const double rope = h.rope() ? 3.0 * double(B * T) * double(NH * h.head_size + h.kv_width()) : 0.0;
  c.flops = forward ? fw + rope : 2.5 * fw + 2.0 * rope;
  // The probability dropout draws its mask inside, forward and again in
  // backward, per tile it visits (attention_dropout_draws).
  if (drop && drop->active()) c.mask_draws = B * NH * attention_dropout_draws(T, forward);
  const double a = bytes_of(dtype);
  const double qkv = double(B * T * h.qkv_width()), o = double(B * T * Cl);
  const double lse = double(B * NH * T);
  if (forward) {
    c.bytes_read = qkv * a;
    c.bytes_written = o * a + lse * kF32;
  } else {
    c.bytes_read = (qkv + o) * a + o * kF32 + lse * kF32;
    c.bytes_written = qkv * a;
  }
  return c;
}

}  // namespace

KernelCalls Backend::matmul_forward_cost(Precision in, Precision out, bool bias, int64_t N,
                                         int64_t C, int64_t OC) {
  KernelCall g = gemm("matmul_forward", in, N, OC, C);
  g.bytes_read = double(N * C + OC * C) * bytes_of(in) + (bias ? double(OC) * kF32 : 0.0);
  g.bytes_written = double(N * OC) * bytes_of(out);
  KernelCalls r{g};
  // The fp32 GEMM adds its bias in a pass of its own over the output
  // (cpu/matmul.cpp); the 16-bit GEMMs add it in their epilogue.
  if (bias && in == Precision::Fp32)
    r.add(memory("matmul_forward.bias", N * OC, double(N * OC + OC) * kF32, double(N * OC) * kF32));
  return r;
}

KernelCalls Backend::matmul_backward_cost(Precision in, bool dinp, bool dweight, bool dbias,
                                          int64_t N, int64_t C, int64_t OC) {
  const double b = bytes_of(in);
  KernelCalls r;
  if (dinp) {  // dinp (N, C) = dout (N, OC) @ weight (OC, C)
    KernelCall g = gemm("matmul_backward.dinp", in, N, C, OC);
    g.bytes_read = double(N * OC + OC * C) * b;
    g.bytes_written = double(N * C) * kF32;
    r.add(g);
  }
  if (dweight) {  // dweight (OC, C) = dout^T @ inp
    KernelCall g = gemm("matmul_backward.dweight", in, OC, C, N);
    g.bytes_read = double(N * OC + N * C) * b;
    g.bytes_written = double(OC * C) * kF32;
    r.add(g);
  }
  if (dbias)  // column sums of dout
    r.add(memory("matmul_backward.dbias", N * OC, double(N * OC) * b, double(OC) * kF32, in));
  return r;
}

// The experts' GEMMs as one GEMM of all R rows (the planner prices the
// rows, not their split), each expert's weight read once.
KernelCalls Backend::grouped_matmul_forward_cost(Precision in, Precision out, bool bias,
                                                 int64_t R, int64_t E, int64_t C, int64_t OC) {
  KernelCall g = gemm("grouped_matmul_forward", in, R, OC, C);
  g.bytes_read = double(R * C + E * OC * C) * bytes_of(in) + (bias ? double(E * OC) * kF32 : 0.0);
  g.bytes_written = double(R * OC) * bytes_of(out);
  return {g};
}

KernelCalls Backend::grouped_matmul_backward_cost(Precision in, bool dinp, bool dweight,
                                                  bool dbias, int64_t R, int64_t E, int64_t C,
                                                  int64_t OC) {
  const double b = bytes_of(in);
  KernelCalls r;
  if (dinp) {
    KernelCall g = gemm("grouped_matmul_backward.dinp", in, R, C, OC);
    g.bytes_read = double(R * OC + E * OC * C) * b;
    g.bytes_written = double(R * C) * kF32;
    r.add(g);
  }
  if (dweight) {
    KernelCall g = gemm("grouped_matmul_backward.dweight", in, E * OC, C, R / std::max<int64_t>(E, 1));
    g.flops = 2.0 * double(R) * double(OC) * double(C);  // every row once, whatever the split
    g.bytes_read = double(R * OC + R * C) * b;
    g.bytes_written = double(E * OC * C) * kF32;
    r.add(g);
  }
  if (dbias)
    r.add(memory("grouped_matmul_backward.dbias", R * OC, double(R * OC) * b,
                 double(E * OC) * kF32, in));
  return r;
}

KernelCalls Backend::moe_route_forward_cost(int64_t N, int64_t E, int64_t K) {
  // logits in; idx, gates, slot out (the counts and stats are E-sized).
  return {memory("moe_route_forward", N * E, double(N * E) * kF32, double(3 * N * K) * kF32)};
}

KernelCalls Backend::moe_route_backward_cost(int64_t N, int64_t E, int64_t K) {
  return {memory("moe_route_backward", N * E, double(N * E + 3 * N * K) * kF32,
                 double(N * E) * kF32)};
}

KernelCalls Backend::moe_permute_cost(Precision x, int64_t N, int64_t K, int64_t C) {
  const double rows = double(N * K * C);
  return {memory("moe_permute", N * K * C, rows * bytes_of(x) + double(N * K) * kF32,
                 rows * bytes_of(x), x)};
}

KernelCalls Backend::moe_combine_cost(int64_t N, int64_t K, int64_t C) {
  const double rows = double(N * K * C);
  return {memory("moe_combine", N * K * C, (rows + double(N * C)) * kF32,
                 double(N * C) * kF32)};
}

KernelCalls Backend::moe_shared_gate_cost(int64_t N, int64_t C) {
  // Reads a row of y and of out (or dout) per token, writes one.
  const double rows = double(N * C);
  return {memory("moe_shared_gate", N * C, 2 * rows * kF32, rows * kF32)};
}

KernelCalls Backend::cast_cost(Precision out, Precision in, int64_t n) {
  if (out == in)
    return {memory("copy", n, double(n) * bytes_of(in), double(n) * bytes_of(out), in)};
  // Named for its 16-bit side.
  const Precision p = out == Precision::Fp32 ? in : out;
  return {memory("cast", n, double(n) * bytes_of(in), double(n) * bytes_of(out), p)};
}

KernelCalls Backend::fill_cost(Precision x, int64_t n) {
  return {memory("fill", n, 0.0, double(n) * bytes_of(x), x)};
}

KernelCalls Backend::accumulate_cost(Precision x, int64_t n) {
  return {residual_add("accumulate", n, x)};
}

KernelCalls Backend::bias_add_cost(bool gelu, int64_t N, int64_t C) {
  const int64_t n = N * C;
  KernelCalls r{memory("bias_add", n, double(n + C) * kF32, double(n) * kF32)};
  if (gelu) r.add(memory("gelu_forward", n, double(n) * kF32, double(n) * kF32));
  return r;
}

KernelCalls Backend::layernorm_forward_cost(Precision out, bool res, int64_t N, int64_t C) {
  const int64_t n = N * C;
  KernelCalls r;
  if (res) r.add(residual_add("add", n));  // res += inp, in the norm's sweep
  // inp, weight and bias in; out, mean and rstd out.
  r.add(memory("layernorm_forward", n, double(n + 2 * C) * kF32,
               double(n) * bytes_of(out) + 2.0 * double(N) * kF32, out));
  return r;
}

KernelCalls Backend::layernorm_backward_cost(int64_t N, int64_t C) {
  const int64_t n = N * C;
  // dout, inp, dinp (+=), mean, rstd, weight in; dinp and the parameter gradients out.
  return {memory("layernorm_backward", n, double(3 * n + 2 * N + 3 * C) * kF32,
                 double(n + 2 * C) * kF32)};
}

KernelCalls Backend::rmsnorm_forward_cost(Precision out, int64_t N, int64_t C) {
  const int64_t n = N * C;
  return {memory("rmsnorm_forward", n, double(n + C) * kF32,
                 double(n) * bytes_of(out) + double(N) * kF32, out)};
}

KernelCalls Backend::rmsnorm_backward_cost(int64_t N, int64_t C) {
  const int64_t n = N * C;
  // dout, inp, dinp (+=), rstd, weight in; dinp and the weight's gradient out.
  return {memory("rmsnorm_backward", n, double(3 * n + N + 2 * C) * kF32, double(n + C) * kF32)};
}

KernelCalls Backend::attention_forward_cost(Precision dtype, int64_t B, int64_t T,
                                            const AttentionHeads& heads,
                                            const DropoutSite* drop) {
  return {attention(true, dtype, B, T, heads, drop)};
}

KernelCalls Backend::attention_backward_cost(Precision dtype, int64_t B, int64_t T,
                                             const AttentionHeads& heads,
                                             const DropoutSite* drop) {
  return {attention(false, dtype, B, T, heads, drop)};
}

KernelCalls Backend::ring_kv_pack_cost(int64_t B, int64_t T, const AttentionHeads& h) {
  const int64_t n = B * T * 2 * h.kv_width();
  return {memory("ring_kv_pack", n, double(n) * kF32, double(n) * kF32)};
}

// One block of the ring: the full attention's figures for Tq queries
// against Tk keys (every pair priced, as attention_forward prices the
// whole T x T; the cp blocks of a rank sum to 1/cp of one process's call).
KernelCalls Backend::ring_attention_block_cost(bool forward, int64_t B, int64_t Tq, int64_t Tk,
                                               const AttentionHeads& h,
                                               const DropoutSite* drop) {
  const int64_t Cl = h.q_width(), NH = h.q_heads, KW = 2 * h.kv_width();
  KernelCall c;
  c.kernel = forward ? "ring_attention_forward_block" : "ring_attention_backward_block";
  c.cls = CallClass::Attention;
  c.dtype = Precision::Fp32;
  c.m = B, c.n = Tq, c.k = Cl, c.batch = NH;
  c.elements = B * Tq * Cl;
  const double fw = 4.0 * double(B) * double(Tq) * double(Tk) * double(Cl);
  // q rotated once per row and block, k once per kv head and block (forward;
  // backward turns dq and dk back too).
  const double rope =
      h.rope() ? 3.0 * double(B) * double(Tq * NH * h.head_size + Tk * h.kv_width()) : 0.0;
  c.flops = forward ? fw + rope : 2.5 * fw + 2.0 * rope;
  if (drop && drop->active()) c.mask_draws = B * NH * ((Tq * Tk + 3) / 4);
  const double q = double(B * Tq * h.qkv_width()), kv = double(B * Tk * KW);
  const double o = double(B * Tq * Cl), lse = double(B * NH * Tq);
  if (forward) {
    c.bytes_read = (q + kv + o + lse) * kF32;
    c.bytes_written = (o + lse) * kF32;
  } else {
    c.bytes_read = (q + kv + 2 * lse + o) * kF32 + kv * kF32;
    c.bytes_written = (o + kv) * kF32;
  }
  return {c};
}

KernelCalls Backend::ring_attention_backward_init_cost(int64_t B, int64_t Tq,
                                                       const AttentionHeads& h) {
  const int64_t n = B * Tq * h.q_width();
  KernelCall c = memory("ring_attention_backward_init", n, 2.0 * double(n) * kF32,
                        double(B * h.q_heads * Tq) * kF32);
  c.flops = 2.0 * double(n);
  return {c};
}

KernelCalls Backend::ring_qkv_grad_cost(Precision dqkv, int64_t B, int64_t T,
                                        const AttentionHeads& h) {
  const int64_t n = B * T * h.qkv_width();
  return {memory("ring_qkv_grad", n, double(n) * kF32, double(n) * bytes_of(dqkv), dqkv)};
}

KernelCalls Backend::attention_decode_cost(int64_t len, const AttentionHeads& h) {
  // q against len cached keys and values: two matrix-vector products per head.
  KernelCall c = memory("attention_decode", h.q_width(),
                        double(2 * len * h.kv_width() + h.q_width()) * kF32,
                        double(h.q_width()) * kF32);
  c.flops = 4.0 * double(len) * double(h.q_width());
  return {c};
}

KernelCalls Backend::rope_rows_cost(int64_t rows, int64_t heads, int64_t HS) {
  const int64_t n = rows * heads * HS;
  KernelCall c = memory("rope_rows", n, double(n) * kF32, double(n) * kF32);
  c.flops = 3.0 * double(n);
  return {c};
}

KernelCalls Backend::gelu_forward_cost(Precision dtype, int64_t n) {
  return {memory("gelu_forward", n, double(n) * bytes_of(dtype), double(n) * bytes_of(dtype),
                 dtype)};
}

KernelCalls Backend::gelu_backward_cost(Precision dtype, int64_t n) {
  // The saved input and the fp32 output gradient in, the input's gradient out.
  const double a = bytes_of(dtype);
  return {memory("gelu_backward", n, double(n) * (a + kF32), double(n) * a, dtype)};
}

KernelCalls Backend::swiglu_forward_cost(Precision dtype, int64_t N, int64_t F) {
  const double nf = double(N * F), a = bytes_of(dtype);
  return {memory("swiglu_forward", N * F, 2 * nf * a, nf * a, dtype)};
}

KernelCalls Backend::swiglu_backward_cost(Precision dtype, int64_t N, int64_t F) {
  const double nf = double(N * F), a = bytes_of(dtype);
  return {memory("swiglu_backward", N * F, 2 * nf * a + nf * kF32, 2 * nf * a, dtype)};
}

KernelCalls Backend::dropout_rows_cost(int64_t rows, int64_t C) {
  // The mask is drawn from the counter-based generator, never stored.
  const int64_t n = rows * C;
  return {memory("dropout_rows", n, double(n) * kF32, double(n) * kF32)};
}

KernelCalls Backend::token_embedding_forward_cost(int64_t N, int64_t C) {
  const double nc = double(N * C) * kF32;
  return {memory("token_embedding_forward", N * C, nc + double(N) * 4, nc)};
}

KernelCalls Backend::token_embedding_backward_cost(int64_t N, int64_t C) {
  // dY, and a read-modify-write of each token's table row.
  const double nc = double(N * C) * kF32;
  return {memory("token_embedding_backward", N * C, 2 * nc + double(N) * 4, nc)};
}

KernelCalls Backend::position_embedding_forward_cost(int64_t B, int64_t T, int64_t C) {
  const double rows = double(B * T * C) * kF32;
  return {memory("position_embedding_forward", B * T * C, 2 * rows, rows)};
}

KernelCalls Backend::position_embedding_backward_cost(int64_t B, int64_t T, int64_t C) {
  const double nc = double(B * T * C) * kF32, tc = double(T * C) * kF32;
  return {memory("position_embedding_backward", B * T * C, nc + tc, tc)};
}

KernelCalls Backend::cross_entropy_forward_cost(int64_t N, int64_t V) {
  // The row max, then the sum of exponentials: two passes over the logits.
  const double nv = double(N * V) * kF32, n = double(N) * kF32;
  return {memory("cross_entropy_forward", N * V, 2 * nv + n, 2 * n)};
}

KernelCalls Backend::cross_entropy_backward_cost(Precision dlogits, int64_t N, int64_t V) {
  const double nv = double(N * V);
  return {memory("cross_entropy_backward", N * V, nv * kF32 + double(2 * N) * kF32,
                 nv * bytes_of(dlogits), dlogits)};
}

KernelCalls Backend::vp_xent_local_max_cost(int64_t N, int64_t V) {
  return {memory("vp_xent_local_max", N * V, double(N * V) * kF32, double(N) * kF32)};
}

KernelCalls Backend::vp_xent_local_sums_cost(int64_t N, int64_t V) {
  const double n = double(N) * kF32;
  return {memory("vp_xent_local_sums", N * V, double(N * V) * kF32 + 2 * n, 2 * n)};
}

KernelCalls Backend::vp_xent_finish_cost(int64_t N) {
  const double n = double(N) * kF32;
  return {memory("vp_xent_finish", N, 4 * n, 2 * n)};
}

KernelCalls Backend::adamw_update_cost(Precision working, int64_t n) {
  // params, grads, m, v read and written (grads zeroed), and the working copy.
  const double b = working == Precision::Fp32 ? 0.0 : 2.0;
  return {memory("adamw_update", n, 4.0 * double(n) * kF32, double(n) * (4.0 * kF32 + b))};
}

KernelCalls Backend::sum_squares_cost(int64_t n) {
  KernelCall c = memory("sum_squares", n, double(n) * kF32, 0.0);
  c.flops = 2.0 * double(n);
  return {c};
}

bool Backend::reports_call(std::string_view kernel) {
  // Every method's own name, and the parts of fused kernels, which the
  // costs above name apart (a same-type cast is a copy, the residual add a
  // norm fuses is an add).
  static constexpr std::string_view kNames[] = {
#define TESSERA_BACKEND_METHOD(Ret, name, params, args, key, ...) #name,
#include "tessera/kernels/backend_methods.inc"
#undef TESSERA_BACKEND_METHOD
      "matmul_forward.bias", "matmul_backward.dinp", "matmul_backward.dweight",
      "matmul_backward.dbias", "copy", "add",
      // The MoE costs each forward / backward pair shares (a calibration of
      // an MoE model writes them), and the grouped GEMMs' bias gradient.
      "moe_permute", "moe_combine", "moe_shared_gate", "grouped_matmul_backward.dbias"};
  for (std::string_view n : kNames)
    if (n == kernel) return true;
  return false;
}

}  // namespace tessera::kernels

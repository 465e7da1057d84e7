// The op list, written after block.cpp and gpt.cpp call by call (same
// order, same shapes); the consistency tests hold it to them.
#include "tessera/model/op_list.h"

#include <algorithm>

#include "tessera/core/error.h"
#include "tessera/kernels/cpu_backend_info.h"

namespace tessera {

const char* op_phase_name(OpPhase p) {
  switch (p) {
    case OpPhase::Forward: return "forward";
    case OpPhase::Recompute: return "recompute";
    case OpPhase::Backward: return "backward";
  }
  return "?";
}

const char* collective_kind_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
  }
  return "?";
}

namespace {

constexpr double kF32 = 4.0;  // bytes of an fp32 element

// The sizes of one micro-batch on tp rank 0 (GPT::act_shape's).
struct Dims {
  int64_t B, T, N, Ns, C, Cl, F, NH, hd, V, tp;
  int64_t KVH;  // key / value heads on this rank (NH without GQA)
  int64_t Q;    // qkv GEMM columns on this rank: (NH + 2 KVH) hd (3 Cl without GQA)
  int64_t FC;   // fc GEMM columns on this rank: F, or gate and up (2 F) under SwiGLU
  bool sp, lowp;
  bool rms, swiglu, rope, bias;  // the Llama family's switches (GPTConfig)
  double a;  // bytes of a stored GEMM activation: 2 under --bf16 / --fp16, else 4
};

// Appends entries of one phase; each method is one kernel call of the engine.
class Builder {
 public:
  Builder(std::vector<OpEntry>& out, const Dims& d, Precision prec, OpPhase phase)
      : out_(out), d_(d), prec_(prec), phase_(phase) {}

  // out (N, OC) = inp (N, K) @ W (OC, K)^T (+ bias): kernels::Ops::matmul_forward.
  // out16: the output is a stored 16-bit activation (qkv, fch) under low precision.
  void matmul_forward(const char* what, int64_t N, int64_t K, int64_t OC, bool out16, bool bias) {
    OpEntry e = gemm(what, "matmul_forward", N, OC, K);
    e.bytes_read = double(N * K + OC * K) * in_bytes() + (bias ? double(OC) * kF32 : 0.0);
    e.bytes_written = double(N * OC) * (out16 && d_.lowp ? 2.0 : kF32);
    out_.push_back(e);
    // The fp32 GEMM adds its bias in a pass of its own over the output
    // (kernels/cpu/matmul.cpp); the 16-bit GEMMs add it in their epilogue.
    if (bias && !d_.lowp)
      memory(Op::Gemm, what, "matmul_forward.bias", N * OC, double(N * OC + OC) * kF32,
             double(N * OC) * kF32);
  }
  // kernels::Ops::matmul_backward of the linear above: dinp (N, K) = dY W,
  // dW (OC, K) = dY^T X, and with a bias dbias (OC) = column sums of dY.
  // Under low precision an fp32 dY is first cast to 16 bits (dy_fp32).
  void matmul_backward(const char* what, int64_t N, int64_t K, int64_t OC, bool bias,
                       bool dy_fp32) {
    if (d_.lowp && dy_fp32) cast(what, N * OC);
    OpEntry dx = gemm(what, "matmul_backward.dinp", N, K, OC);
    dx.bytes_read = double(N * OC + OC * K) * in_bytes();
    dx.bytes_written = double(N * K) * kF32;
    out_.push_back(dx);
    OpEntry dw = gemm(what, "matmul_backward.dweight", OC, K, N);
    dw.bytes_read = double(N * OC + N * K) * in_bytes();
    dw.bytes_written = double(OC * K) * kF32;
    out_.push_back(dw);
    if (bias)
      memory(Op::Gemm, what, "matmul_backward.dbias", N * OC, double(N * OC) * in_bytes(),
             double(OC) * kF32, prec_);
  }
  void memory(Op op, const char* what, const char* kernel, int64_t elements, double read,
              double written, Precision dtype = Precision::Fp32) {
    OpEntry e;
    e.phase = phase_;
    e.cls = OpClass::Memory;
    e.op = op;
    e.what = what;
    e.kernel = kernel;
    e.dtype = dtype;
    e.elements = elements;
    e.bytes_read = read;
    e.bytes_written = written;
    out_.push_back(e);
  }
  // `elements` of `dtype` (fp32 unless said); activation: see OpEntry::activation.
  void collective(CollectiveKind kind, const char* what, int64_t elements, bool activation,
                  Precision dtype = Precision::Fp32) {
    OpEntry e;
    e.phase = phase_;
    e.cls = OpClass::Collective;
    e.op = Op::Comm;
    e.what = what;
    e.kernel = collective_kind_name(kind);
    e.collective = kind;
    e.group_size = d_.tp;
    e.dtype = dtype;
    e.elements = elements;
    e.bytes = double(elements) * (dtype == Precision::Fp32 ? kF32 : 2.0);
    e.activation = activation;
    out_.push_back(e);
  }
  // The flash-style attention kernel: qkv (B, T, Q) -> out (B, T, Cl), lse (B, NH, T).
  // Under GQA each query head reads its group's k / v head (indexed, never
  // copied), so the matmul FLOPs are MHA's per query head and only the bytes
  // read shrink. RoPE rotates q and k as the kernel loads them: 3 FLOPs an
  // element (a pair (x1, x2) -> (x1 c - x2 s, x2 c + x1 s) is 6) over the
  // NH + KVH heads of each token; backward rotates them again for its
  // recomputed scores and rotates dq, dk back: twice that.
  void attention(bool forward, bool probs_dropout) {
    const double qkv = double(d_.B * d_.T * d_.Q), o = double(d_.B * d_.T * d_.Cl);
    const double lse = double(d_.B * d_.NH * d_.T);
    OpEntry e;
    e.phase = phase_;
    e.cls = OpClass::Attention;
    e.op = Op::Attention;
    e.what = "attention";
    e.kernel = forward ? "attention_forward" : "attention_backward";
    e.dtype = prec_;
    e.m = d_.B, e.n = d_.T, e.k = d_.Cl, e.batch = d_.NH;
    e.elements = d_.B * d_.T * d_.Cl;
    // Q K^T and P V over the full T x T (flops.cpp's count); backward
    // recomputes the scores: 5 matmuls against 2 (Dao et al. 2022).
    const double fw = 4.0 * double(d_.B) * double(d_.T) * double(d_.T) * double(d_.Cl);
    e.flops = forward ? fw : 2.5 * fw;
    if (d_.rope) e.flops += (forward ? 1.0 : 2.0) * rope_flops(d_);
    // Its probability dropout draws the mask inside the kernel, forward and
    // again in backward (kernels/cpu_backend_info.h), for each local head.
    if (probs_dropout) e.mask_draws = d_.B * d_.NH * kernels::attention_dropout_draws(d_.T, forward);
    if (forward) {
      e.bytes_read = qkv * d_.a;
      e.bytes_written = o * d_.a + lse * kF32;
    } else {
      e.bytes_read = (qkv + o) * d_.a + o * kF32 + lse * kF32;
      e.bytes_written = qkv * d_.a;
    }
    out_.push_back(e);
  }
  // Megatron's unfused attention (planner only): the scores of NH heads
  // per sequence as batched GEMMs, the softmax, its dropout.
  void unfused_attention(bool forward, bool probs_dropout) {
    const int64_t T = d_.T, hd = d_.hd, batch = d_.B * d_.NH;
    const int64_t S = batch * T * T;  // scores
    auto bgemm = [&](const char* what, int64_t m, int64_t n, int64_t k) {
      OpEntry e = gemm(what, "batched_matmul", m, n, k, batch);
      e.op = Op::Attention;
      e.bytes_read = double(batch) * double(m * k + k * n) * d_.a;
      e.bytes_written = double(batch) * double(m * n) * d_.a;
      out_.push_back(e);
    };
    const double s = double(S) * d_.a;
    if (forward) {
      bgemm("attn_scores", T, T, hd);                                   // Q K^T
      memory(Op::Attention, "softmax", "softmax_forward", S, s, s, prec_);  // scale, mask, softmax
      if (probs_dropout)  // writes its 1-byte mask, kept for backward
        memory(Op::Attention, "attn_dropout", "dropout", S, s, s + double(S), prec_);
      bgemm("attn_values", T, hd, T);  // P V
    } else {
      bgemm("attn_dprobs", T, T, hd);  // dP = dO V^T
      if (probs_dropout)
        memory(Op::Attention, "attn_dropout", "dropout", S, s + double(S), s, prec_);
      memory(Op::Attention, "softmax", "softmax_backward", S, 2 * s, s, prec_);  // P, dP -> dS
      bgemm("attn_dvalues", T, hd, T);  // dV = P^T dO
      bgemm("attn_dquery", T, hd, T);   // dQ = dS K
      bgemm("attn_dkey", T, hd, T);     // dK = dS^T Q
    }
  }
  // RoPE's rotation of q and k once over a micro-batch (see attention()).
  static double rope_flops(const Dims& d) {
    return 3.0 * double(d.B * d.T) * double((d.NH + d.KVH) * d.hd);
  }
  // The type of a stored GEMM activation: the run's 16-bit type, or fp32.
  Precision activation_dtype() const { return d_.lowp ? prec_ : Precision::Fp32; }
  void cast(const char* what, int64_t n) {
    memory(Op::Cast, what, "cast", n, double(n) * kF32, double(n) * 2.0, prec_);
  }

 private:
  double in_bytes() const { return d_.lowp ? 2.0 : kF32; }
  OpEntry gemm(const char* what, const char* kernel, int64_t m, int64_t n, int64_t k,
               int64_t batch = 1) const {
    OpEntry e;
    e.phase = phase_;
    e.cls = OpClass::Gemm;
    e.op = Op::Gemm;
    e.what = what;
    e.kernel = kernel;
    e.dtype = prec_;
    e.m = m, e.n = n, e.k = k, e.batch = batch;
    e.flops = 2.0 * double(m) * double(n) * double(k) * double(batch);
    return e;
  }

  std::vector<OpEntry>& out_;
  const Dims& d_;
  Precision prec_;
  OpPhase phase_;
};

// Element-wise kernels of the (Ns, C) regions, fp32 unless said.
// The norms: LayerNorm (weight, bias; saves mean and rstd) or, in the Llama
// family, RMSNorm (weight only; saves rstd).
void layernorm_forward(Builder& b, const Dims& d, const char* what, Precision prec) {
  const int64_t n = d.Ns * d.C;
  if (d.rms) {
    b.memory(Op::LayerNorm, what, "rmsnorm_forward", n, double(n + d.C) * kF32,
             double(n) * d.a + double(d.Ns) * kF32, prec);
    return;
  }
  b.memory(Op::LayerNorm, what, "layernorm_forward", n, double(n + 2 * d.C) * kF32,
           double(n) * d.a + 2.0 * double(d.Ns) * kF32, prec);
}
void layernorm_backward(Builder& b, const Dims& d, const char* what) {
  const int64_t n = d.Ns * d.C;
  if (d.rms) {
    // dout, inp, dinp (+=), rstd, weight; dinp and the weight's gradient
    b.memory(Op::LayerNorm, what, "rmsnorm_backward", n, double(3 * n + d.Ns + 2 * d.C) * kF32,
             double(n + d.C) * kF32);
    return;
  }
  // dout, inp, dinp (+=), mean, rstd, weight; dinp and the parameter gradients
  b.memory(Op::LayerNorm, what, "layernorm_backward", n,
           double(3 * n + 2 * d.Ns + 3 * d.C) * kF32, double(n + 2 * d.C) * kF32);
}
// The MLP's activation: GELU of the fc output (N, F), or SwiGLU:
// silu(gate) * up of its (N, 2 F) rows [gate | up] into (N, F). Elements:
// the output's N F either way.
void activation_forward(Builder& b, const Dims& d, Precision prec) {
  const double nf = double(d.N * d.F);
  if (d.swiglu) {
    b.memory(Op::Gelu, "swiglu", "swiglu_forward", d.N * d.F, 2 * nf * d.a, nf * d.a, prec);
    return;
  }
  b.memory(Op::Gelu, "gelu", "gelu_forward", d.N * d.F, nf * d.a, nf * d.a, prec);
}
// Backward: the saved input and the fp32 output gradient in, the input's
// gradient (16-bit under --bf16 / --fp16: the next GEMM's dY) out.
void activation_backward(Builder& b, const Dims& d, Precision prec) {
  const double nf = double(d.N * d.F);
  if (d.swiglu) {
    b.memory(Op::Gelu, "swiglu", "swiglu_backward", d.N * d.F, 2 * nf * d.a + nf * kF32,
             2 * nf * d.a, prec);
    return;
  }
  b.memory(Op::Gelu, "gelu", "gelu_backward", d.N * d.F, nf * d.a + nf * kF32, nf * d.a, prec);
}
void add(Builder& b, const char* what, const char* kernel, int64_t n) {
  b.memory(Op::Residual, what, kernel, n, 2.0 * double(n) * kF32, double(n) * kF32);
}
void dropout_rows(Builder& b, const char* what, int64_t n) {
  // The mask is drawn from the counter-based generator, never stored.
  b.memory(Op::Dropout, what, "dropout_rows", n, double(n) * kF32, double(n) * kF32);
}
void copy(Builder& b, Op op, const char* what, int64_t n) {
  b.memory(op, what, "copy", n, double(n) * kF32, double(n) * kF32);
}
void fill(Builder& b, Op op, const char* what, int64_t n) {
  b.memory(op, what, "fill", n, 0.0, double(n) * kF32);
}

struct Sites {
  bool probs = false, hidden = false;  // attention-probability / hidden dropout active
};

// row_parallel_forward (block.cpp): the GEMM, the leave of the tp region,
// the bias after the sum.
// No bias under --disable-bias-linear: no bias pass.
void row_parallel_forward(Builder& b, const Dims& d, const char* what, int64_t K) {
  if (d.tp == 1) {
    b.matmul_forward(what, d.N, K, d.C, false, d.bias);
    return;
  }
  b.matmul_forward(what, d.N, K, d.C, false, false);
  b.collective(d.sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce, what,
               d.N * d.C, true);
  if (!d.bias) return;
  const int64_t n = d.Ns * d.C;
  b.memory(Op::Residual, what, "bias_add", n, double(n + d.C) * kF32, double(n) * kF32);
}

// tp_enter_forward of a stored (16-bit under low precision) LayerNorm output.
void enter_forward(Builder& b, const Dims& d, const char* what) {
  if (d.sp) b.collective(CollectiveKind::AllGather, what, d.N * d.C, true, b.activation_dtype());
}
// tp_enter_backward: the input gradient of a column-parallel linear.
void enter_backward(Builder& b, const Dims& d, const char* what) {
  if (d.tp == 1) return;
  b.collective(d.sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce, what,
               d.N * d.C, true);
}
// tp_leave_backward: SP gathers the fp32 gradient of the region's rows.
void leave_backward(Builder& b, const Dims& d, const char* what) {
  if (d.sp) b.collective(CollectiveKind::AllGather, what, d.N * d.C, true);
}

void attention_core(Builder& b, const OpListConfig& c, const Sites& s, bool forward) {
  if (c.flash_attention)
    b.attention(forward, s.probs);
  else
    b.unfused_attention(forward, s.probs);
}

void block_forward(Builder& b, const Dims& d, const OpListConfig& c, const Sites& s) {
  const Precision p = c.precision;
  layernorm_forward(b, d, "ln1", p);
  enter_forward(b, d, "ln1");
  b.matmul_forward("qkv", d.N, d.C, d.Q, true, d.bias);
  attention_core(b, c, s, true);
  row_parallel_forward(b, d, "attn_proj", d.Cl);
  if (s.hidden) dropout_rows(b, "attn_out_dropout", d.Ns * d.C);
  add(b, "residual", "accumulate", d.Ns * d.C);
  layernorm_forward(b, d, "ln2", p);
  enter_forward(b, d, "ln2");
  b.matmul_forward("fc", d.N, d.C, d.FC, true, d.bias);
  activation_forward(b, d, p);
  row_parallel_forward(b, d, "mlp_proj", d.F);
  if (s.hidden) dropout_rows(b, "mlp_out_dropout", d.Ns * d.C);
  add(b, "residual", "accumulate", d.Ns * d.C);
}

void block_recompute(Builder& b, const Dims& d, const OpListConfig& c, const Sites& s) {
  switch (c.recompute) {
    case Recompute::None: return;
    case Recompute::Selective:
      attention_core(b, c, s, true);
      activation_forward(b, d, c.precision);
      return;
    case Recompute::Full: block_forward(b, d, c, s); return;
  }
}

// branch_grad (block.cpp): with dropout, a masked copy of dresid.
void branch_grad(Builder& b, const Dims& d, const Sites& s, const char* what) {
  if (!s.hidden) return;
  copy(b, Op::Dropout, what, d.Ns * d.C);
  dropout_rows(b, what, d.Ns * d.C);
}

// Under SP each rank's gradients of the norms' parameters cover only its
// rows and are summed over tp: the engine zeroes and all-reduces a slot of
// C for each tensor the norm has (LayerNorm's weight and bias: 4 C a layer,
// 2 C at the head; RMSNorm's weight: 2 C and C), then accumulates each.
int64_t norm_tensors(const Dims& d) { return d.rms ? 1 : 2; }

void block_backward(Builder& b, const Dims& d, const OpListConfig& c, const Sites& s) {
  const Precision p = c.precision;
  const int64_t norms = 2 * norm_tensors(d);
  if (d.sp) fill(b, Op::LayerNorm, "ln_grads", norms * d.C);
  // MLP branch.
  branch_grad(b, d, s, "mlp_out_dropout");
  leave_backward(b, d, "mlp_proj");
  b.matmul_backward("mlp_proj", d.N, d.F, d.C, d.bias, true);
  activation_backward(b, d, p);
  enter_forward(b, d, "ln2");  // re-gathered: only the shard was kept
  b.matmul_backward("fc", d.N, d.C, d.FC, d.bias, false);
  enter_backward(b, d, "fc");
  layernorm_backward(b, d, "ln2");
  // Attention branch.
  branch_grad(b, d, s, "attn_out_dropout");
  leave_backward(b, d, "attn_proj");
  b.matmul_backward("attn_proj", d.N, d.Cl, d.C, d.bias, true);
  attention_core(b, c, s, false);
  enter_forward(b, d, "ln1");
  b.matmul_backward("qkv", d.N, d.C, d.Q, d.bias, false);
  enter_backward(b, d, "qkv");
  layernorm_backward(b, d, "ln1");
  if (d.sp) {
    b.collective(CollectiveKind::AllReduce, "ln_grads", norms * d.C, false);
    for (int64_t i = 0; i < norms; ++i) add(b, "ln_grads", "accumulate", d.C);
  }
}

void embed_forward(Builder& b, const Dims& d, const Sites& s) {
  const double nc = double(d.N * d.C) * kF32;
  b.memory(Op::Embedding, "wte", "token_embedding_forward", d.N * d.C, nc + double(d.N) * 4,
           nc);
  if (d.tp > 1)
    b.collective(d.sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce, "wte",
                 d.N * d.C, true);
  // Under RoPE positions enter inside attention: no table to add.
  const double rows = double(d.Ns * d.C) * kF32;
  if (!d.rope)
    b.memory(Op::Embedding, "wpe", "position_embedding_forward", d.Ns * d.C, 2 * rows, rows);
  if (s.hidden) dropout_rows(b, "embedding_dropout", d.Ns * d.C);
}

void embed_backward(Builder& b, const Dims& d, const Sites& s) {
  if (s.hidden) dropout_rows(b, "embedding_dropout", d.Ns * d.C);
  leave_backward(b, d, "wte");
  const double nc = double(d.N * d.C) * kF32, tc = double(d.T * d.C) * kF32;
  // dY, and a read-modify-write of each token's table row
  b.memory(Op::Embedding, "wte", "token_embedding_backward", d.N * d.C,
           2 * nc + double(d.N) * 4, nc);
  if (!d.rope)
    b.memory(Op::Embedding, "wpe", "position_embedding_backward", d.N * d.C, nc + tc, tc);
}

// The LM head's GEMMs are the same shape tied or untied
// (--untie-embeddings-and-output-weights): only where dW goes differs (the
// token table's gradient, or lm_head.weight's of its own).
void head_forward(Builder& b, const Dims& d, const OpListConfig& c) {
  layernorm_forward(b, d, "ln_f", c.precision);
  enter_forward(b, d, "ln_f");
  if (d.V > 0) b.matmul_forward("lm_head", d.N, d.C, d.V, false, false);
  const double nv = double(d.N * d.V) * kF32, n = double(d.N) * kF32;
  if (d.tp == 1) {
    // The row max, then the sum of exponentials: two passes over the logits.
    b.memory(Op::Loss, "loss", "cross_entropy_forward", d.N * d.V, 2 * nv + n, 2 * n);
    return;
  }
  b.memory(Op::Loss, "loss", "vp_xent_local_max", d.N * d.V, nv, n);
  b.collective(CollectiveKind::AllReduce, "loss_max", d.N, false);
  b.memory(Op::Loss, "loss", "vp_xent_local_sums", d.N * d.V, nv + 2 * n, 2 * n);
  b.collective(CollectiveKind::AllReduce, "loss_sums", 2 * d.N, false);
  b.memory(Op::Loss, "loss", "vp_xent_finish", d.N, 4 * n, 2 * n);
}

void head_backward(Builder& b, const Dims& d, const OpListConfig& c) {
  fill(b, Op::Loss, "dresid", d.Ns * d.C);
  const double nv = double(d.N * d.V);
  // One kernel for the whole vocabulary and for this rank's slice of it.
  b.memory(Op::Loss, "loss", "cross_entropy_backward", d.N * d.V,
           nv * kF32 + double(2 * d.N) * kF32, nv * d.a, c.precision);
  enter_forward(b, d, "ln_f");
  if (d.V > 0)
    b.matmul_backward("lm_head", d.N, d.C, d.V, false, false);
  else
    fill(b, Op::Gemm, "lm_head", d.N * d.C);
  enter_backward(b, d, "ln_f");
  const int64_t norms = norm_tensors(d);
  if (d.sp) fill(b, Op::LayerNorm, "ln_grads", norms * d.C);
  layernorm_backward(b, d, "ln_f");
  if (d.sp) {
    b.collective(CollectiveKind::AllReduce, "ln_grads", norms * d.C, false);
    for (int64_t i = 0; i < norms; ++i) add(b, "ln_grads", "accumulate", d.C);
  }
}

}  // namespace

OpList op_list(const OpListConfig& c) {
  const GPTConfig& m = c.model;
  const int64_t t = c.tp;
  TESSERA_CHECK(t >= 1 && m.num_heads % t == 0 && m.hidden_size % t == 0 && m.ffn() % t == 0,
                "op_list: heads {}, hidden {} and ffn {} must divide over tp {}", m.num_heads,
                m.hidden_size, m.ffn(), t);
  TESSERA_CHECK(m.kv_heads() % t == 0, "op_list: query groups {} must divide over tp {}",
                m.kv_heads(), t);
  const bool sp = c.sequence_parallel && t > 1;
  TESSERA_CHECK(!sp || m.seq_length % t == 0,
                "op_list: sequence length {} does not divide over tp {}", m.seq_length, t);
  Dims d{};
  d.B = c.micro_batch;
  d.T = m.seq_length;
  d.N = d.B * d.T;
  d.Ns = sp ? d.N / t : d.N;
  d.C = m.hidden_size;
  d.Cl = m.hidden_size / t;
  d.F = m.ffn() / t;
  d.NH = m.num_heads / t;
  d.hd = m.head_size();
  d.KVH = m.kv_heads() / t;
  d.Q = m.qkv_width() / t;
  d.FC = m.fc_width() / t;
  d.rms = m.rmsnorm();
  d.swiglu = m.swiglu;
  d.rope = m.rope();
  d.bias = m.add_bias_linear;
  // Rank 0's real vocabulary columns (GPT::act_shape: padding gets no logits).
  d.V = std::min(m.padded_vocab(t) / t, m.vocab_size);
  d.tp = t;
  d.sp = sp;
  d.lowp = c.precision != Precision::Fp32;
  d.a = d.lowp ? 2.0 : kF32;
  Sites s;
  s.probs = c.training && m.attention_dropout > 0.0f;
  s.hidden = c.training && m.hidden_dropout > 0.0f;

  OpList r;
  {
    Builder fw(r.layer, d, c.precision, OpPhase::Forward);
    block_forward(fw, d, c, s);
    Builder rc(r.layer, d, c.precision, OpPhase::Recompute);
    block_recompute(rc, d, c, s);
    Builder bw(r.layer, d, c.precision, OpPhase::Backward);
    block_backward(bw, d, c, s);
  }
  {
    Builder fw(r.embed, d, c.precision, OpPhase::Forward);
    embed_forward(fw, d, s);
    Builder bw(r.embed, d, c.precision, OpPhase::Backward);
    embed_backward(bw, d, s);
  }
  {
    Builder fw(r.head, d, c.precision, OpPhase::Forward);
    head_forward(fw, d, c);
    Builder bw(r.head, d, c.precision, OpPhase::Backward);
    head_backward(bw, d, c);
  }
  return r;
}

}  // namespace tessera

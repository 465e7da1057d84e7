// What the engine ran for one micro-batch, against the op list it publishes
// (model/op_list.h): a backend that derives from the CPU one and writes down
// every kernel call (name, shape, precision), the collective log of the tp
// group, and the comparison. Shared by tests/model/test_op_list.cpp (one
// process) and tests/mpi/mpi_test_op_list.cpp (tp 2, with and without SP).
//
// The recorder maps Backend calls to entries on its own (from the call's
// arguments and its views' dtype tags), independently of op_list.cpp:
//   matmul_forward    one GEMM  m = N, n = OC, k = C; the fp32 one with a
//                     bias also its bias pass over N * OC elements
//   matmul_backward   dinp GEMM (N, C, OC), dweight GEMM (OC, C, N), and with
//                     a bias the column sum of dY over N * OC elements
//   attention_*       (B, T, C, NH) of the query heads (C = NH * HS)
//   cast              "copy" between buffers of one type, else "cast"
//   everything else   elements (n, N * C, rows * C, B * T * C, N * V, N;
//                     rmsnorm N * C, swiglu N * F)
// Compared: GEMMs and attention calls as multisets of (phase, kernel, shape,
// precision); memory-bound kernels by total elements per (phase, kernel,
// precision); collectives in order (kind, bytes). Recomputation runs inside
// backward, so the list's recompute and backward entries are compared with
// what ran in backward together.
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "tessera/comm/collective_log.h"
#include "tessera/kernels/cpu/cpu_backend.h"
#include "tessera/model/op_list.h"

namespace tessera::test {

struct RanKernel {
  std::string kernel;
  bool shaped = false;  // GEMM or attention: (m, n, k, batch) compared exactly
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t elements = 0;
  Precision dtype = Precision::Fp32;
};

class RecordingBackend : public kernels::CpuBackend {
 public:
  mutable std::vector<RanKernel> calls;
  mutable bool on = true;  // off: calls outside the micro-batch (the working copy's refresh)
  using Act = kernels::Act;
  using ConstAct = kernels::ConstAct;

  // ---- GEMMs (the operands' type: inp's) ----
  void matmul_forward(Act out, ConstAct inp, ConstAct weight, const float* bias, int64_t N,
                      int64_t C, int64_t OC) const override {
    gemm("matmul_forward", N, OC, C, inp.dtype);
    // cpu::matmul_forward's own bias pass; the 16-bit GEMMs fuse it
    if (bias && !inp.lowp()) mem("matmul_forward.bias", N * OC);
    CpuBackend::matmul_forward(out, inp, weight, bias, N, C, OC);
  }
  void matmul_backward(float* dinp, float* dweight, float* dbias, ConstAct dout, ConstAct inp,
                       ConstAct weight, int64_t N, int64_t C, int64_t OC, bool acc_dinp,
                       bool acc_dw) const override {
    if (dinp) gemm("matmul_backward.dinp", N, C, OC, inp.dtype);
    gemm("matmul_backward.dweight", OC, C, N, inp.dtype);
    if (dbias) mem("matmul_backward.dbias", N * OC, inp.dtype);
    CpuBackend::matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, acc_dinp,
                                acc_dw);
  }
  // A cast into 16 bits is listed under its 16-bit type; one between
  // buffers of one type is a copy.
  void cast(Act out, ConstAct in, int64_t n) const override {
    if (out.dtype == in.dtype)
      mem("copy", n, out.dtype);
    else
      mem("cast", n, out.lowp() ? out.dtype : in.dtype);
    CpuBackend::cast(out, in, n);
  }
  void fill(Act x, float value, int64_t n) const override {
    mem("fill", n, x.dtype);
    CpuBackend::fill(x, value, n);
  }
  void accumulate(float* y, ConstAct x, int64_t n) const override {
    mem("accumulate", n, x.dtype);
    CpuBackend::accumulate(y, x, n);
  }
  // With GELU: the fc bias fused into it, the bias pass and the GELU the
  // op list lists (under matmul_forward.bias and gelu_forward).
  void bias_add(float* out, const float* bias, int64_t N, int64_t C,
                float* gelu_out) const override {
    if (gelu_out) {
      mem("matmul_forward.bias", N * C);
      mem("gelu_forward", N * C);
    } else {
      mem("bias_add", N * C);
    }
    CpuBackend::bias_add(out, bias, N, C, gelu_out);
  }
  // ---- norms (elements N * C); with res, the fused residual add and the
  // norm, as two op-list entries (the fp32 add and the norm) ----
  void layernorm_forward(Act out, float* mean, float* rstd, const float* inp, float* res,
                         const float* w, const float* b, int64_t N, int64_t C) const override {
    if (res) mem("accumulate", N * C);
    mem("layernorm_forward", N * C, out.dtype);
    CpuBackend::layernorm_forward(out, mean, rstd, inp, res, w, b, N, C);
  }
  void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                          const float* w, const float* mean, const float* rstd, int64_t N,
                          int64_t C) const override {
    mem("layernorm_backward", N * C);
    CpuBackend::layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
  }
  void rmsnorm_forward(Act out, float* rstd, const float* inp, const float* w, int64_t N,
                       int64_t C, float eps) const override {
    mem("rmsnorm_forward", N * C, out.dtype);
    CpuBackend::rmsnorm_forward(out, rstd, inp, w, N, C, eps);
  }
  void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp,
                        const float* w, const float* rstd, int64_t N, int64_t C) const override {
    mem("rmsnorm_backward", N * C);
    CpuBackend::rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, C);
  }
  // ---- attention ----
  void attention_forward(Act out, float* lse, ConstAct qkv, int64_t B, int64_t T,
                         const AttentionHeads& hd, const DropoutSite* d) const override {
    attn("attention_forward", B, T, hd, qkv.dtype);
    CpuBackend::attention_forward(out, lse, qkv, B, T, hd, d);
  }
  void attention_backward(Act dqkv, const float* dout, ConstAct qkv, ConstAct out,
                          const float* lse, int64_t B, int64_t T, const AttentionHeads& hd,
                          const DropoutSite* d) const override {
    attn("attention_backward", B, T, hd, qkv.dtype);
    CpuBackend::attention_backward(dqkv, dout, qkv, out, lse, B, T, hd, d);
  }
  // ---- activations (SwiGLU's elements N * F: the output's) ----
  void gelu_forward(Act out, ConstAct inp, int64_t n) const override {
    mem("gelu_forward", n, inp.dtype);
    CpuBackend::gelu_forward(out, inp, n);
  }
  void gelu_backward(Act dinp, ConstAct inp, const float* dout, int64_t n) const override {
    mem("gelu_backward", n, inp.dtype);
    CpuBackend::gelu_backward(dinp, inp, dout, n);
  }
  void swiglu_forward(Act out, ConstAct inp, int64_t N, int64_t F) const override {
    mem("swiglu_forward", N * F, inp.dtype);
    CpuBackend::swiglu_forward(out, inp, N, F);
  }
  void swiglu_backward(Act dinp, ConstAct inp, const float* dout, int64_t N,
                       int64_t F) const override {
    mem("swiglu_backward", N * F, inp.dtype);
    CpuBackend::swiglu_backward(dinp, inp, dout, N, F);
  }
  // ---- dropout ----
  void dropout_rows(float* x, int64_t rows, int64_t C, int64_t row0, int64_t T,
                    const DropoutSite& site) const override {
    mem("dropout_rows", rows * C);
    CpuBackend::dropout_rows(x, rows, C, row0, T, site);
  }
  // ---- embedding ----
  void token_embedding_forward(float* out, const int32_t* tokens, const float* wte, int64_t N,
                               int64_t C, int64_t vb, int64_t ve) const override {
    mem("token_embedding_forward", N * C);
    CpuBackend::token_embedding_forward(out, tokens, wte, N, C, vb, ve);
  }
  void token_embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int64_t N,
                                int64_t C, int64_t vb, int64_t ve) const override {
    mem("token_embedding_backward", N * C);
    CpuBackend::token_embedding_backward(dwte, dout, tokens, N, C, vb, ve);
  }
  void position_embedding_forward(float* out, const float* wpe, int64_t B, int64_t T, int64_t C,
                                  int64_t pos0) const override {
    mem("position_embedding_forward", B * T * C);
    CpuBackend::position_embedding_forward(out, wpe, B, T, C, pos0);
  }
  void position_embedding_backward(float* dwpe, const float* dout, int64_t B, int64_t T,
                                   int64_t C) const override {
    mem("position_embedding_backward", B * T * C);
    CpuBackend::position_embedding_backward(dwpe, dout, B, T, C);
  }
  // ---- loss ----
  void cross_entropy_forward(float* losses, float* lse, const float* logits, const int32_t* t,
                             int64_t N, int64_t V) const override {
    mem("cross_entropy_forward", N * V);
    CpuBackend::cross_entropy_forward(losses, lse, logits, t, N, V);
  }
  void cross_entropy_backward(Act dl, const float* logits, const float* lse, const int32_t* t,
                              float dloss, int64_t N, int64_t V, int64_t vb) const override {
    mem("cross_entropy_backward", N * V, dl.dtype);
    CpuBackend::cross_entropy_backward(dl, logits, lse, t, dloss, N, V, vb);
  }
  void vp_xent_local_max(float* row_max, const float* logits, int64_t N, int64_t V) const override {
    mem("vp_xent_local_max", N * V);
    CpuBackend::vp_xent_local_max(row_max, logits, N, V);
  }
  void vp_xent_local_sums(float* sums, const float* logits, const float* row_max,
                          const int32_t* t, int64_t N, int64_t V, int64_t vb) const override {
    mem("vp_xent_local_sums", N * V);
    CpuBackend::vp_xent_local_sums(sums, logits, row_max, t, N, V, vb);
  }
  void vp_xent_finish(float* losses, float* lse, const float* row_max, const float* sums,
                      const int32_t* t, int64_t N) const override {
    mem("vp_xent_finish", N);
    CpuBackend::vp_xent_finish(losses, lse, row_max, sums, t, N);
  }

 private:
  void gemm(const char* k, int64_t m, int64_t n, int64_t kk, Precision p) const {
    if (on) calls.push_back({k, true, m, n, kk, 1, 0, p});
  }
  // (B, T, C, NH) of the query heads, C = NH * HS: attention's FLOPs do
  // not depend on how many key/value heads they share (GQA) or on RoPE.
  void attn(const char* k, int64_t B, int64_t T, const AttentionHeads& hd, Precision p) const {
    if (on) calls.push_back({k, true, B, T, hd.q_width(), hd.q_heads, 0, p});
  }
  void mem(const char* k, int64_t n, Precision p = Precision::Fp32) const {
    if (on) calls.push_back({k, false, 0, 0, 0, 1, n, p});
  }
};

// ---- the comparison ----

// (kernel, m, n, k, batch, dtype) -> calls for shaped kernels; (kernel,
// dtype) -> total elements for the others.
struct KernelTally {
  std::map<std::tuple<std::string, int64_t, int64_t, int64_t, int64_t, int>, int64_t> shaped;
  std::map<std::pair<std::string, int>, int64_t> elements;
  void add(const std::string& kernel, bool shaped_kernel, int64_t m, int64_t n, int64_t k,
           int64_t batch, int64_t elems, Precision p, int64_t times = 1) {
    if (shaped_kernel)
      shaped[{kernel, m, n, k, batch, int(p)}] += times;
    else
      elements[{kernel, int(p)}] += elems * times;
  }
  bool operator==(const KernelTally&) const = default;
};

inline KernelTally tally(const std::vector<RanKernel>& ran) {
  KernelTally t;
  for (const RanKernel& r : ran) t.add(r.kernel, r.shaped, r.m, r.n, r.k, r.batch, r.elements, r.dtype);
  return t;
}

// The list's entries of the given phases, `times` over (layers).
inline void tally_list(KernelTally& t, const std::vector<OpEntry>& list,
                       std::initializer_list<OpPhase> phases, int64_t times = 1) {
  for (const OpEntry& e : list) {
    if (e.cls == OpClass::Collective) continue;
    bool in = false;
    for (OpPhase p : phases) in = in || e.phase == p;
    if (!in) continue;
    t.add(e.kernel, e.cls != OpClass::Memory, e.m, e.n, e.k, e.batch, e.elements, e.dtype, times);
  }
}

inline std::string describe(const KernelTally& t) {
  std::string s;
  for (const auto& [key, n] : t.shaped) {
    const auto& [k, m, nn, kk, b, p] = key;
    s += "  " + k + " (" + std::to_string(m) + ", " + std::to_string(nn) + ", " +
         std::to_string(kk) + ", " + std::to_string(b) + ") " + precision_name(Precision(p)) +
         " x" + std::to_string(n) + "\n";
  }
  for (const auto& [key, n] : t.elements)
    s += "  " + key.first + " " + precision_name(Precision(key.second)) + " " +
         std::to_string(n) + " elements\n";
  return s;
}

// A collective as the log and the list both say it: kind and data size.
using RanCollective = std::pair<std::string, size_t>;

inline std::vector<RanCollective> collectives_of(const std::vector<comm::CollectiveRecord>& log,
                                                 const std::string& group) {
  std::vector<RanCollective> out;
  for (const auto& r : log)
    if (r.group == group) out.emplace_back(std::string(comm::comm_op_name(r.op)), r.bytes);
  return out;
}

inline void append_collectives(std::vector<RanCollective>& out, const std::vector<OpEntry>& list,
                               std::initializer_list<OpPhase> phases) {
  for (const OpEntry& e : list) {
    if (e.cls != OpClass::Collective) continue;
    for (OpPhase p : phases)
      if (e.phase == p) out.emplace_back(e.kernel, size_t(e.bytes));
  }
}

}  // namespace tessera::test

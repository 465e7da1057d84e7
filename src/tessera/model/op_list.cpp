// The op list: the engine's trace (op_trace.h), and the one variant the
// engine never runs but the planner prices — Megatron's unfused attention.
#include "tessera/model/op_list.h"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <string>

#include "tessera/config/model_fields.h"
#include "tessera/core/error.h"
#include "tessera/model/op_trace.h"

namespace tessera {

const char* op_phase_name(OpPhase p) {
  switch (p) {
    case OpPhase::Forward: return "forward";
    case OpPhase::Recompute: return "recompute";
    case OpPhase::Backward: return "backward";
  }
  return "?";
}

OpEntry op_entry_of(const kernels::KernelCall& k) {
  OpEntry e;
  e.cls = k.cls == kernels::CallClass::Gemm        ? OpClass::Gemm
          : k.cls == kernels::CallClass::Attention ? OpClass::Attention
                                                   : OpClass::Memory;
  e.kernel = k.kernel;
  e.dtype = k.dtype;
  e.m = k.m, e.n = k.n, e.k = k.k, e.batch = k.batch;
  e.elements = k.elements;
  e.bytes_read = k.bytes_read;
  e.bytes_written = k.bytes_written;
  e.flops = k.flops;
  e.mask_draws = k.mask_draws;
  return e;
}

namespace {

// Megatron's unfused attention in place of one traced flash-attention
// entry `fa` (B, T, Cl, NH in m, n, k, batch): the scores of NH heads per
// sequence as batched GEMMs, the softmax, the dropout of the probabilities
// (when `fa` drew a mask), all stored T x T in the activation type.
void unfused_attention(const OpEntry& fa, std::vector<OpEntry>& out) {
  const bool forward = std::string_view(fa.kernel) == "attention_forward";
  const bool probs_dropout = fa.mask_draws > 0;
  const int64_t B = fa.m, T = fa.n, NH = fa.batch, hd = fa.k / fa.batch, batch = B * NH;
  const double a = fa.dtype == Precision::Fp32 ? 4.0 : 2.0;
  const int64_t S = batch * T * T;  // scores
  const double s = double(S) * a;
  auto bgemm = [&](const char* what, int64_t m, int64_t n, int64_t k) {
    OpEntry e = fa;
    e.cls = OpClass::Gemm;
    e.what = what;
    e.kernel = "batched_matmul";
    e.m = m, e.n = n, e.k = k, e.batch = batch;
    e.elements = 0, e.mask_draws = 0;
    e.flops = 2.0 * double(m) * double(n) * double(k) * double(batch);
    e.bytes_read = double(batch) * double(m * k + k * n) * a;
    e.bytes_written = double(batch) * double(m * n) * a;
    out.push_back(e);
  };
  auto memory = [&](const char* what, const char* kernel, double read, double written) {
    OpEntry e = fa;
    e.cls = OpClass::Memory;
    e.what = what;
    e.kernel = kernel;
    e.m = e.n = e.k = 0, e.batch = 1;
    e.elements = S, e.mask_draws = 0, e.flops = 0;
    e.bytes_read = read, e.bytes_written = written;
    out.push_back(e);
  };
  if (forward) {
    bgemm("attn_scores", T, T, hd);                          // Q K^T
    memory("softmax", "softmax_forward", s, s);               // scale, mask, softmax
    if (probs_dropout)                                        // writes its 1-byte mask
      memory("attn_dropout", "dropout", s, s + double(S));
    bgemm("attn_values", T, hd, T);  // P V
  } else {
    bgemm("attn_dprobs", T, T, hd);  // dP = dO V^T
    if (probs_dropout) memory("attn_dropout", "dropout", s + double(S), s);
    memory("softmax", "softmax_backward", 2 * s, s);  // P, dP -> dS
    bgemm("attn_dvalues", T, hd, T);  // dV = P^T dO
    bgemm("attn_dquery", T, hd, T);   // dQ = dS K
    bgemm("attn_dkey", T, hd, T);     // dK = dS^T Q
  }
}

void unfuse_attention(std::vector<OpEntry>& list) {
  std::vector<OpEntry> out;
  out.reserve(list.size() + 16);
  for (const OpEntry& e : list)
    if (e.cls == OpClass::Attention)
      unfused_attention(e, out);
    else
      out.push_back(e);
  list = std::move(out);
}

// Every field a trace may depend on: the model's from its table
// (config/model_fields.h), so a field added there keys the cache without a
// change here (the layer count and the initialisation, which do not change
// one layer's calls, only split the cache between models a search never
// mixes).
std::string trace_key(const OpListConfig& c) {
  return fmt::format("{}| {} {} {} {} {} {} {}", model_fields_text(c.model), c.micro_batch, c.tp,
                     c.sequence_parallel, int(c.recompute), int(c.precision), c.training,
                     c.flash_attention);
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
  TESSERA_CHECK(!(c.sequence_parallel && t > 1) || m.seq_length % t == 0,
                "op_list: sequence length {} does not divide over tp {}", m.seq_length, t);
  // A search plans thousands of layouts over a few hundred distinct lists:
  // each is traced once.
  static std::mutex mutex;
  static std::map<std::string, OpList> traced;
  const std::string key = trace_key(c);
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (auto it = traced.find(key); it != traced.end()) return it->second;
  }
  OpList r = trace_op_list(c);
  if (!c.flash_attention) unfuse_attention(r.layer);
  const std::lock_guard<std::mutex> lock(mutex);
  if (traced.size() > 4096) traced.clear();  // a bound, far above any one search's need
  return traced.emplace(key, std::move(r)).first->second;
}

}  // namespace tessera

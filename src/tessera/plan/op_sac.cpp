#include "tessera/plan/op_sac.h"

#include "tessera/plan/gemm_model.h"

namespace tessera::plan {

Profile op_sac_recompute(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L,
                         const Profile& layer_forward) {
  Profile r = layer_forward;
  r[Op::Gemm] = r[Op::Attention] = r[Op::Comm] = 0;  // SDPA saved; the linears below
  const int64_t rows = L.par.micro_batch * m.seq_length, t = L.par.tp;
  const int64_t h = m.hidden_size, kv = m.kv_heads() * m.head_size();
  // (rows, out, in) on this tp rank: wk and w3 column-parallel, wo row-parallel.
  const GemmShape recomputed[] = {{rows, kv / t, h}, {rows, h, h / t}, {rows, m.ffn() / t, h}};
  for (const GemmShape& g : recomputed) r[Op::Gemm] += gemm_seconds(sys, L.precision, g);
  return r;
}

// What the policy keeps (torchtitan 9dec370 _apply_ac_to_transformer_block:
// non-reentrant checkpoint of each block with op-level save decisions), in
// 16-bit elements per token on this tp rank:
// - the block's input, which the checkpoint keeps (h; h / t under SP);
// - the saved mms' outputs: wq (h / t) and wv (G hd / t), column-parallel;
//   w1 (F / t), column-parallel; w2's (h), row-parallel, so the partial sum
//   before its reduction, full width;
// - SDPA's output (h / t) and its log-sum-exp (fp32, one per query head);
// - under SP, the two reduce-scatters' outputs (h / t each; in the list).
// Everything else (norms, RoPE, SwiGLU's silu and product, wk, wo, w3) is
// recomputed. llama-3-8b, tp 1: 4h + G hd + F = 15.5 h of 2 bytes a token,
// where Korthikanti's selective counts 34.
double op_sac_layer_bytes(const GPTConfig& m, int64_t micro_batch, int64_t tp, bool sp) {
  const double tokens = double(m.seq_length * micro_batch), t = double(tp);
  const double h = double(m.hidden_size), kv = double(m.kv_heads() * m.head_size());
  const double input = sp ? h / t : h;
  const double saved_mm = (h + kv + double(m.ffn())) / t + h;
  const double sdpa = h / t;
  const double reduce_scatters = sp ? 2 * h / t : 0.0;
  const double lse = 4.0 * double(m.num_heads) / t;  // bytes
  return tokens * (2.0 * (input + saved_mm + sdpa + reduce_scatters) + lse);
}

}  // namespace tessera::plan

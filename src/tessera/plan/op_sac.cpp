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

}  // namespace tessera::plan

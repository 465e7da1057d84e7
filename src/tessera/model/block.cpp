#include "tessera/model/block.h"

#include "tessera/kernels/cpu/attention.h"
#include "tessera/kernels/cpu/elementwise.h"
#include "tessera/kernels/cpu/gelu.h"
#include "tessera/kernels/cpu/layernorm.h"
#include "tessera/kernels/cpu/matmul.h"

namespace tessera {

void block_forward(const LayerWeights& w, LayerActs& a, const float* x, const ActShape& s,
                   Profile* prof) {
  using namespace cpu;
  const int64_t N = s.B * s.T;
  TIMED(prof, Op::LayerNorm,
        layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, w.ln1_w, w.ln1_b, N, s.C));
  TIMED(prof, Op::Gemm, matmul_forward(a.qkv, a.ln1, w.qkv_w, w.qkv_b, N, s.C, 3 * s.Cl));
  TIMED(prof, Op::Attention, attention_forward(a.atty, a.lse, a.qkv, s.B, s.T, s.Cl, s.NH));
  TIMED(prof, Op::Gemm, matmul_forward(a.res_mid, a.atty, w.proj_w, w.proj_b, N, s.Cl, s.C));
  TIMED(prof, Op::Residual, add(a.res_mid, a.res_mid, x, N * s.C));

  TIMED(prof, Op::LayerNorm,
        layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res_mid, w.ln2_w, w.ln2_b, N, s.C));
  TIMED(prof, Op::Gemm, matmul_forward(a.fch, a.ln2, w.fc_w, w.fc_b, N, s.C, s.F));
  TIMED(prof, Op::Gelu, gelu_forward(a.fch_gelu, a.fch, N * s.F));
  TIMED(prof, Op::Gemm,
        matmul_forward(a.res_out, a.fch_gelu, w.fcproj_w, w.fcproj_b, N, s.F, s.C));
  TIMED(prof, Op::Residual, add(a.res_out, a.res_out, a.res_mid, N * s.C));
}

void block_backward(const LayerWeights& w, const LayerWeights& g, const LayerActs& a,
                    const float* x, float* dresid, const Activations& scratch, const ActShape& s,
                    Profile* prof) {
  using namespace cpu;
  const int64_t N = s.B * s.T;
  // The residual passes dresid straight through; each branch adds its part
  // (layernorm_backward accumulates into dresid).
  // MLP branch.
  TIMED(prof, Op::Gemm,
        matmul_backward(scratch.dfch, g.fcproj_w, g.fcproj_b, dresid, a.fch_gelu, w.fcproj_w, N,
                        s.F, s.C, false));
  TIMED(prof, Op::Gelu, gelu_backward(scratch.dfch, a.fch, scratch.dfch, N * s.F));
  TIMED(prof, Op::Gemm,
        matmul_backward(scratch.dln, g.fc_w, g.fc_b, scratch.dfch, a.ln2, w.fc_w, N, s.C, s.F,
                        false));
  TIMED(prof, Op::LayerNorm,
        layernorm_backward(dresid, g.ln2_w, g.ln2_b, scratch.dln, a.res_mid, w.ln2_w, a.ln2_mean,
                           a.ln2_rstd, N, s.C));
  // Attention branch.
  TIMED(prof, Op::Gemm,
        matmul_backward(scratch.datty, g.proj_w, g.proj_b, dresid, a.atty, w.proj_w, N, s.Cl,
                        s.C, false));
  TIMED(prof, Op::Attention,
        attention_backward(scratch.dqkv, scratch.datty, a.qkv, a.atty, a.lse, s.B, s.T, s.Cl,
                           s.NH));
  TIMED(prof, Op::Gemm,
        matmul_backward(scratch.dln, g.qkv_w, g.qkv_b, scratch.dqkv, a.ln1, w.qkv_w, N, s.C,
                        3 * s.Cl, false));
  TIMED(prof, Op::LayerNorm,
        layernorm_backward(dresid, g.ln1_w, g.ln1_b, scratch.dln, x, w.ln1_w, a.ln1_mean,
                           a.ln1_rstd, N, s.C));
}

}  // namespace tessera

// One transformer block (pre-LayerNorm GPT-2), forward and backward, written
// out op by op:
//   res_mid = x + proj(attention(qkv(ln_1(x))))
//   res_out = res_mid + fcproj(gelu(fc(ln_2(res_mid))))
// Under tensor parallelism qkv and fc are column-parallel, proj and fcproj
// row-parallel, each pair wrapped in tensor_parallel.h's enter / leave.
#pragma once
#include "tessera/model/activations.h"
#include "tessera/model/tensor_parallel.h"
#include "tessera/model/weights.h"

namespace tessera {

// x (Ns, C) -> a.res_out (Ns, C); fills every saved view of `a`. tp_full
// (B, T, C) is scratch for sequence parallelism (null without it).
void block_forward(const LayerWeights& w, LayerActs& a, const float* x, const ActShape& s,
                   const TensorParallel& tp, float* tp_full, Profile* prof);

// Before block_backward under recomputation (s.recompute, recompute.h):
// refill the views of `a` that forward did not keep. Selective reruns the
// attention core (atty, lse from qkv) and GELU (fch_gelu from fch); full
// reruns block_forward from the layer input x, collectives included (every
// tp rank recomputes together), rewriting a.res_out with the same values.
// Nothing to do without recomputation.
void block_recompute(const LayerWeights& w, LayerActs& a, const float* x, const ActShape& s,
                     const TensorParallel& tp, float* tp_full, Profile* prof);

// Given dresid (Ns, C) = dL/d res_out, accumulates parameter gradients into
// g and turns dresid into dL/d x in place. `scratch` supplies dln, dqkv,
// datty, dfch and tp_full. Under sequence parallelism ln_grads (4*C) is
// scratch for this micro-batch's LayerNorm gradients before their tp sum.
void block_backward(const LayerWeights& w, const LayerWeights& g, const LayerActs& a,
                    const float* x, float* dresid, const Activations& scratch,
                    const ActShape& s, const TensorParallel& tp, float* ln_grads,
                    Profile* prof);

}  // namespace tessera

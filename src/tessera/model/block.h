// One transformer block (pre-LayerNorm GPT-2), forward and backward, written
// out op by op:
//   res_mid = x + proj(attention(qkv(ln_1(x))))
//   res_out = res_mid + fcproj(gelu(fc(ln_2(res_mid))))
#pragma once
#include "tessera/model/activations.h"
#include "tessera/model/weights.h"

namespace tessera {

// x (B, T, C) -> a.res_out (B, T, C); fills every saved view of `a`.
void block_forward(const LayerWeights& w, LayerActs& a, const float* x, const ActShape& s,
                   Profile* prof);

// Given dresid (B, T, C) = dL/d res_out, accumulates parameter gradients into
// g and turns dresid into dL/d x in place. `scratch` supplies dln, dqkv,
// datty and dfch.
void block_backward(const LayerWeights& w, const LayerWeights& g, const LayerActs& a,
                    const float* x, float* dresid, const Activations& scratch,
                    const ActShape& s, Profile* prof);

}  // namespace tessera

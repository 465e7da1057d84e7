// Activation recomputation (--recompute-granularity none|selective|full):
// what forward keeps for backward, and what backward computes again.
//
//   none       every layer keeps all of its views (activations.h).
//   selective  every layer keeps the linears' inputs and outputs that are
//              not cheap to rebuild: ln1 (+ stats), qkv, res_mid, ln2
//              (+ stats), fch, res_out. It drops the attention core's
//              output atty and its row log-sum-exp lse, and the GELU output
//              fch_gelu; backward recomputes attention_forward(qkv) and
//              gelu(fch) into one shared layer's scratch. Our attention is
//              flash-style (no T x T matrix is ever stored), so unlike
//              Megatron's selective there are no scores to drop: the saving
//              is atty + lse + fch_gelu = B*T*(Cl + F) + B*NH*T floats per
//              layer, for the attention forward's 4*T^2*C FLOPs per sequence
//              per layer (what flops.cpp counts) plus an elementwise GELU.
//   full       every layer keeps only its output res_out (the next layer's
//              input; the first layer's input is `encoded`), so a stage
//              holds (L + 1) * Ns * C floats of layer state; backward reruns
//              the whole block_forward of a layer into one shared layer's
//              scratch, then its backward (flops.cpp: one more forward).
//
// The mode travels in ActShape::recompute (GPT::act_shape fills it from
// GPT::set_recompute); activations_bytes reports each mode's true size.
#pragma once
#include <string_view>

#include "tessera/parallel/parallel_config.h"

namespace tessera {

// "none" | "selective" | "full"; anything else throws tessera::Error naming
// --recompute-granularity.
Recompute recompute_parse(std::string_view name);
const char* recompute_name(Recompute r);

}  // namespace tessera

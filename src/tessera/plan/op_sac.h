// torchtitan's op-level selective activation checkpointing ("selective",
// selective_ac_option "op"; torchtitan 9dec370 parallelisms/
// parallelize_llama.py _apply_ac_to_transformer_block): inside each block it
// saves the outputs of aten.mm (all but every second one), of SDPA and of
// reduce-scatters, and recomputes everything else in backward. On its Llama
// the seven linears run wq, wk, wv, wo, w1, w3, w2, so wk, wo and w3 are
// recomputed, and with them every element-wise op (norms, RoPE, SwiGLU's
// silu and product). Megatron's "selective" recomputes the attention core
// only: this replaces that pass. bf16 linears only: under torchao's Float8
// the linears are _scaled_mm, not in the save list, and all of them would
// be recomputed (not modelled).
#pragma once
#include "tessera/config/gpt_config.h"
#include "tessera/core/profile.h"
#include "tessera/plan/layout.h"
#include "tessera/plan/system.h"

namespace tessera::plan {

// One layer's recompute pass for one micro-batch under op SAC, from the
// layer's priced forward: its memory-bound work (every op that is neither a
// GEMM, the attention kernel nor a collective) and the wk, wo and w3 GEMMs.
Profile op_sac_recompute(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L,
                         const Profile& layer_forward);

// Bytes one layer keeps for backward per micro-batch under op SAC (16-bit
// activations): the checkpoint's input and the saved ops' outputs, where
// Korthikanti's accounting keeps every intermediate a layer's backward reads.
double op_sac_layer_bytes(const GPTConfig& m, int64_t micro_batch, int64_t tp, bool sp);

}  // namespace tessera::plan

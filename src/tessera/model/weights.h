// Named views into a flat parameter (or gradient) buffer laid out by
// ParamLayout. The same struct serves weights and their gradients.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/config/gpt_config.h"
#include "tessera/model/param_layout.h"

namespace tessera {

// Shapes are this rank's slices: C hidden (replicated), Cq = NH * hs / tp
// query width, Ckv = KVH * hs / tp key (and value) width (Cq under MHA: GPT's
// Cl), Cqkv = Cq + 2 Ckv, F = ffn / tp, Ff = F (2 F under SwiGLU). A
// parameter the model does not have is null: the norms' biases under
// RMSNorm, every linear bias under --disable-bias-linear.
struct LayerWeights {
  float* ln1_w = nullptr;     // (C)
  float* ln1_b = nullptr;     // (C) LayerNorm only
  float* qkv_w = nullptr;     // (Cqkv, C)  [q | k | v] of this rank's heads
  float* qkv_b = nullptr;     // (Cqkv)
  float* proj_w = nullptr;    // (C, Cq)
  float* proj_b = nullptr;    // (C)
  float* ln2_w = nullptr;     // (C)
  float* ln2_b = nullptr;     // (C) LayerNorm only
  float* fc_w = nullptr;      // (Ff, C)  SwiGLU: [gate | up] of this rank's slice
  float* fc_b = nullptr;      // (Ff)
  float* fcproj_w = nullptr;  // (C, F)
  float* fcproj_b = nullptr;  // (C)
  // An MoE layer (model/moe_layer.h) instead of the dense fc / fcproj: null
  // in a dense layer, and the dense views null in an MoE one.
  // The routed experts are this rank's El = E / ep of them (all E without
  // expert parallelism), bound from the layer's expert unit.
  float* router_w = nullptr;         // (E, C)
  float* experts_fc_w = nullptr;     // (El, Ff, C)
  float* experts_fc_b = nullptr;     // (El, Ff)
  float* experts_proj_w = nullptr;   // (El, C, F)
  float* experts_proj_b = nullptr;   // (El, C)
  // Its shared expert (GPTConfig::moe_shared; model/moe_shared_expert.h):
  // one dense MLP of width S every token runs, and its optional gate.
  float* shared_fc_w = nullptr;      // (Sf, C)  SwiGLU: [gate | up]
  float* shared_fc_b = nullptr;      // (Sf)
  float* shared_proj_w = nullptr;    // (C, S)
  float* shared_proj_b = nullptr;    // (C)
  float* shared_gate_w = nullptr;    // (1, C)
  bool moe() const { return router_w != nullptr; }
};

struct ModelWeights {
  float* wte = nullptr;  // (Vp / tp, C) vocab slice; the LM head too unless untied
  float* wpe = nullptr;  // (T_max, C) learned positions only (null under rope)
  std::vector<LayerWeights> layers;  // this rank's layers, in execution order
  float* lnf_w = nullptr;  // (C)
  float* lnf_b = nullptr;  // (C) LayerNorm only
  float* lm_head = nullptr;  // (Vp / tp, C) untied output layer (null when tied)
};

// Resolve every named view of `layout` against `base` (a buffer of layout.numel() floats).
ModelWeights bind_weights(const ParamLayout& layout, float* base);

// Point the views of the parameters inside `unit` at unit_base, which holds
// the unit's elements (unit.numel() floats, in layout order). ZeRO-3 uses
// this to run a layer from its gathered copy.
void bind_unit(ModelWeights& w, const ParamLayout& layout, const ParamUnit& unit, float* unit_base);

// GPT-2 initialisation: N(0, std) for matrices and embeddings (the untied
// lm_head too), residual output projections scaled by 1/sqrt(2 * layers),
// zero biases, unit norm gains; vocabulary padding rows stay zero. Every element is drawn
// from (seed, parameter name, global index), so any layout starts from the
// same model.
void init_weights(const ParamLayout& layout, const GPTConfig& model, float* base, uint64_t seed);
// The same for the parameters of one unit, written to unit_base (unit.numel()
// floats): ZeRO-3 draws a unit at a time and keeps its slice.
void init_unit_weights(const ParamLayout& layout, const GPTConfig& model, const ParamUnit& unit,
                       float* unit_base, uint64_t seed);

}  // namespace tessera

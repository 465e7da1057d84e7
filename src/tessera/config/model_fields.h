// GPTConfig's fields, declared once (field.h): the model flags of `tessera
// train` with their help, their keys in checkpoint metadata, and which of
// them a planned run's train command writes. Every other file names a model
// flag through flag:: below, so each is spelled here and nowhere else.
#pragma once
#include <span>
#include <string>

#include "tessera/config/field.h"
#include "tessera/config/gpt_config.h"

namespace tessera {

namespace flag {
inline constexpr const char num_layers[] = "--num-layers";
inline constexpr const char hidden_size[] = "--hidden-size";
inline constexpr const char num_heads[] = "--num-attention-heads";
inline constexpr const char ffn_hidden_size[] = "--ffn-hidden-size";
inline constexpr const char seq_length[] = "--seq-length";
inline constexpr const char vocab_size[] = "--vocab-size";
inline constexpr const char max_positions[] = "--max-position-embeddings";
inline constexpr const char vocab_divisor[] = "--make-vocab-size-divisible-by";
inline constexpr const char init_std[] = "--init-method-std";
inline constexpr const char attention_dropout[] = "--attention-dropout";
inline constexpr const char hidden_dropout[] = "--hidden-dropout";
inline constexpr const char normalization[] = "--normalization";
inline constexpr const char norm_epsilon[] = "--norm-epsilon";
inline constexpr const char swiglu[] = "--swiglu";
inline constexpr const char position_embedding[] = "--position-embedding-type";
inline constexpr const char rotary_base[] = "--rotary-base";
inline constexpr const char group_query_attention[] = "--group-query-attention";
inline constexpr const char num_query_groups[] = "--num-query-groups";
inline constexpr const char untie_embeddings[] = "--untie-embeddings-and-output-weights";
inline constexpr const char disable_bias_linear[] = "--disable-bias-linear";
inline constexpr const char add_qkv_bias[] = "--add-qkv-bias";
inline constexpr const char num_experts[] = "--num-experts";
inline constexpr const char moe_layer_freq[] = "--moe-layer-freq";
inline constexpr const char moe_router_topk[] = "--moe-router-topk";
inline constexpr const char moe_router_pre_softmax[] = "--moe-router-pre-softmax";
inline constexpr const char moe_aux_loss_coeff[] = "--moe-aux-loss-coeff";
inline constexpr const char moe_z_loss_coeff[] = "--moe-z-loss-coeff";
inline constexpr const char moe_load_balancing[] = "--moe-router-load-balancing-type";
inline constexpr const char moe_capacity_factor[] = "--moe-expert-capacity-factor";
inline constexpr const char moe_shared_size[] = "--moe-shared-expert-intermediate-size";
inline constexpr const char moe_shared_gate[] = "--moe-shared-expert-gate";
}  // namespace flag

// In --help order. On kSurfaceLayout: the model's part of a planned run's
// train keys (bridge::model_keys), each size that differs from the default
// and each Llama switch that differs from GPT-2. --vocab-size is
// kOptionElsewhere: the launch adds it (the data decides the vocabulary).
std::span<const Field<GPTConfig>> model_fields();

// The field of `flag` (one of flag::); throws for a flag of no field.
const Field<GPTConfig>& model_field(std::string_view flag);

// Every field's value, space-separated: text that differs whenever any
// field of the two models does (the op trace's cache key).
std::string model_fields_text(const GPTConfig& m);

}  // namespace tessera

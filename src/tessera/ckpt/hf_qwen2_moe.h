// Hugging Face Qwen2-MoE (Qwen2MoeForCausalLM, model_type qwen2_moe), both
// ways: Qwen2's attention (hf_qwen2.h: Llama's names, q, k, v biases), norms
// and head; Llama's MLP names in a dense layer; and in each MoE layer
//   ours                                     theirs (Qwen2MoeForCausalLM state dict)
//   h.N.mlp.router.weight (E, C)             model.layers.N.mlp.gate.weight (E, C)
//   h.N.mlp.experts.fc.weight (E, 2F, C)     ...mlp.experts.J.gate_proj.weight (F, C),
//     expert J's rows [gate | up]              ...mlp.experts.J.up_proj.weight (F, C)
//   h.N.mlp.experts.proj.weight (E, C, F)    ...mlp.experts.J.down_proj.weight (C, F)
//   h.N.mlp.shared_expert.fc.weight (2S, C)  ...mlp.shared_expert.gate_proj.weight (S, C),
//     rows [gate | up]                         ...mlp.shared_expert.up_proj.weight (S, C)
//   h.N.mlp.shared_expert.proj.weight (C, S) ...mlp.shared_expert.down_proj.weight (C, S)
//   h.N.mlp.shared_expert_gate.weight (1, C) ...mlp.shared_expert_gate.weight (1, C)
// The config's keys, ours from theirs:
//   num_experts, num_experts_per_tok      --num-experts, --moe-router-topk
//   norm_topk_prob false / true           --moe-router-pre-softmax on / off (the
//                                         gates the full softmax's top-k as they are,
//                                         or renormalised: Megatron's default)
//   moe_intermediate_size                 --ffn-hidden-size: the experts' width, and
//   intermediate_size                     the dense layers' (one width here: a file
//                                         with dense layers of another is refused)
//   shared_expert_intermediate_size       --moe-shared-expert-intermediate-size, with
//                                         --moe-shared-expert-gate (always gated)
//   decoder_sparse_step, mlp_only_layers  --moe-layer-freq k: layer l is MoE when l is
//                                         not in mlp_only_layers and (l + 1) %
//                                         decoder_sparse_step == 0; written as step 1
//                                         and mlp_only_layers = the dense layers. A set
//                                         of MoE layers no k gives is refused.
//   router_aux_loss_coef                  --moe-aux-loss-coeff / top-k (as Mixtral's)
// Refused naming the key: use_sliding_window true, and what Qwen2's and
// Llama's configs refuse (rope_scaling, hidden_act, ...).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/ckpt/hf_llama.h"

namespace tessera::ckpt {

// The Hugging Face tensors that hold our parameter `ours` of MoE model m.
std::vector<HfPiece> qwen2_moe_hf_pieces(const std::string& ours, const GPTConfig& m);

// Qwen2MoeConfig of a model (bos_token_id = eos_token_id = eot_id when >= 0).
nlohmann::json qwen2_moe_hf_config(const GPTConfig& m, int32_t eot_id = -1);
// The model a Qwen2MoeConfig describes; refuses, naming the key, what this
// engine does not compute.
GPTConfig model_from_qwen2_moe_hf_config(const nlohmann::json& cfg);

// out_dir/model.safetensors (or shards and an index past max_shard_bytes) +
// config.json of a whole Qwen2-MoE-shaped model (tp = 1).
void export_hf_qwen2_moe(const GPT& model, const std::string& out_dir, int32_t eot_id = -1,
                         uint64_t max_shard_bytes = 0);
// Fill a whole Qwen2-MoE-shaped model (tp = 1) from Qwen2-MoE weights (a
// file, an index and its shards, or a directory holding either).
void import_hf_qwen2_moe(const std::string& weights, GPT& model);

}  // namespace tessera::ckpt

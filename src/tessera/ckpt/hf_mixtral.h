// Hugging Face Mixtral (MixtralForCausalLM) naming, both ways: Llama's
// (hf_llama.h) for the embedding, attention, norms and head, and each MoE
// layer's router and experts, whose stacked tensors split by expert:
//   ours                                   theirs (MixtralForCausalLM state dict)
//   h.N.mlp.router.weight (E, C)           model.layers.N.block_sparse_moe.gate.weight (E, C)
//   h.N.mlp.experts.fc.weight (E, 2F, C)   ...block_sparse_moe.experts.J.w1.weight (F, C),
//     expert J's rows [gate | up]            ...experts.J.w3.weight (F, C)
//   h.N.mlp.experts.proj.weight (E, C, F)  ...block_sparse_moe.experts.J.w2.weight (C, F)
// Mixtral's router takes the softmax over all E logits, keeps the top k and
// renormalises them: the softmax over the chosen logits, which is ours
// (Megatron's default), so both compute the same function. Mixtral has no
// biases, experts in every layer and no capacity (dropless); a model
// otherwise is refused by hf_arch_of (--moe-router-pre-softmax too: its
// gates are not renormalised); one with a shared expert or q, k, v biases
// is Qwen2-MoE's (hf_qwen2_moe.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/ckpt/hf_llama.h"

namespace tessera::ckpt {

// The Hugging Face tensors that hold our parameter `ours` of MoE model m.
std::vector<HfPiece> mixtral_hf_pieces(const std::string& ours, const GPTConfig& m);

// Our stacked experts' `part` ("mlp.experts.fc.weight" (E, 2F, C): expert
// J's rows [gate | up]; "mlp.experts.proj.weight" (E, C, F)) as E tensors
// each "<experts>J.<name>.weight", with the family's names for the gate,
// up and down projections (Mixtral's w1, w3, w2). `ours` and `family`
// name a bias, which no family holds, in the refusal.
std::vector<HfPiece> expert_pieces(const std::string& ours, const std::string& part,
                                   const std::string& experts, const GPTConfig& m,
                                   const char* gate, const char* up, const char* down,
                                   const char* family);

// MixtralConfig of a model; bos_token_id = eos_token_id = eot_id when >= 0.
// router_aux_loss_coef is ours / top-k: transformers' load-balancing loss
// is E * sum_e f_e P_e with f_e the share of the N tokens choosing e (each
// token counted k times), top-k times Megatron's E / (N^2 k) sum over raw
// counts and summed probabilities, so equal coefficients would not be the
// same loss.
nlohmann::json mixtral_hf_config(const GPTConfig& m, int32_t eot_id = -1);
// The model a MixtralConfig describes. Refuses, naming the key, what this
// engine does not compute (sliding_window attention, router jitter noise, and
// whatever model_from_llama_hf_config refuses).
GPTConfig model_from_mixtral_hf_config(const nlohmann::json& cfg);

// out_dir/model.safetensors (or shards and an index past max_shard_bytes) +
// config.json of a whole Mixtral-shaped model (tp = 1).
void export_hf_mixtral(const GPT& model, const std::string& out_dir, int32_t eot_id = -1,
                       uint64_t max_shard_bytes = 0);
// Fill a whole Mixtral-shaped model (tp = 1) from Mixtral weights (a file,
// an index and its shards, or a directory holding either).
void import_hf_mixtral(const std::string& weights, GPT& model);

}  // namespace tessera::ckpt

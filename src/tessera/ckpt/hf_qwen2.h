// Hugging Face Qwen2 (Qwen2ForCausalLM), both ways: Llama's names and row
// blocks (hf_llama.h) with q_proj, k_proj and v_proj biases and no other
// bias, which is our --disable-bias-linear --add-qkv-bias: the qkv bias
// (Cqkv) splits into the three projections' biases as its weight's rows do.
// Qwen2's sliding-window attention (use_sliding_window) is refused.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/ckpt/hf_llama.h"

namespace tessera::ckpt {

// Qwen2Config of a model (bos_token_id = eos_token_id = eot_id when >= 0).
nlohmann::json qwen2_hf_config(const GPTConfig& m, int32_t eot_id = -1);
// The model a Qwen2Config describes; refuses, naming the key, what this
// engine does not compute (use_sliding_window true, and whatever
// model_from_llama_hf_config refuses).
GPTConfig model_from_qwen2_hf_config(const nlohmann::json& cfg);

// out_dir/model.safetensors (or shards and an index past max_shard_bytes) +
// config.json of a whole Qwen2-shaped model (tp = 1).
void export_hf_qwen2(const GPT& model, const std::string& out_dir, int32_t eot_id = -1,
                     uint64_t max_shard_bytes = 0);
// Fill a whole Qwen2-shaped model (tp = 1) from Qwen2 weights (a file, an
// index and its shards, or a directory holding either).
void import_hf_qwen2(const std::string& weights, GPT& model);

}  // namespace tessera::ckpt

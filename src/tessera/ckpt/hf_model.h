// Hugging Face export and import, whichever architecture holds the model:
// GPT-2 (hf_gpt2.h), Llama (hf_llama.h), Mixtral (hf_mixtral.h), Qwen2
// (hf_qwen2.h) or Qwen2-MoE (hf_qwen2_moe.h). Export picks by the model's
// settings; import and eval pick by config.json (model_type, else
// architectures), and the model built from it picks the tensor names.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/model/gpt.h"

namespace tessera::ckpt {

enum class HfArch { Gpt2, Llama, Mixtral, Qwen2, Qwen2Moe };

// The architecture that holds model m. Refuses, naming the settings, a mix
// neither holds (e.g. GPT-2 with rotary positions alone).
HfArch hf_arch_of(const GPTConfig& m);
// The architecture config.json describes (model_type "gpt2", "llama",
// "mixtral", "qwen2" or "qwen2_moe", else architectures); a file with
// neither model_type nor architectures is GPT-2 (as before Llama existed).
HfArch hf_arch_of(const nlohmann::json& cfg);
const char* hf_arch_name(HfArch a);  // "GPT-2", "Llama", "Mixtral", "Qwen2", "Qwen2-MoE"

// The model config.json describes (model_from_hf_config,
// model_from_llama_hf_config, ..., model_from_qwen2_moe_hf_config).
GPTConfig model_from_hf(const nlohmann::json& cfg);

// model.safetensors + config.json of a whole model (tp = 1), in the
// architecture that holds it; eot_id: bos/eos_token_id when >= 0. Past
// max_shard_bytes (> 0) the weights are shards and an index, as
// save_pretrained(max_shard_size=...) writes them (hf_shards.h).
void export_hf(const GPT& model, const std::string& out_dir, int32_t eot_id = -1,
               uint64_t max_shard_bytes = 0);

// Fill a whole model (tp = 1) from a safetensors file, a
// model.safetensors.index.json and its shards, or a directory holding
// either (hf_tensors.h), with the names of the architecture that holds the
// model (one built by model_from_hf).
void import_hf(const std::string& weights, GPT& model);

}  // namespace tessera::ckpt

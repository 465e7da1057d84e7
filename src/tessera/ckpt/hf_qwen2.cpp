#include "tessera/ckpt/hf_qwen2.h"

#include "tessera/ckpt/hf_files.h"
#include "tessera/core/error.h"

namespace tessera::ckpt {

using nlohmann::json;

json qwen2_hf_config(const GPTConfig& m, int32_t eot_id) {
  json c = llama_hf_config(m, eot_id);
  // Qwen2Config has no bias switches (its q, k, v always have biases, nothing
  // else does) and no head_dim (hidden_size / num_attention_heads).
  for (const char* k : {"attention_bias", "mlp_bias", "pretraining_tp", "head_dim"}) c.erase(k);
  c["architectures"] = {"Qwen2ForCausalLM"};
  c["model_type"] = "qwen2";
  c["use_sliding_window"] = false;
  c["sliding_window"] = nullptr;
  c["max_window_layers"] = m.num_layers;
  return c;
}

GPTConfig model_from_qwen2_hf_config(const json& c) {
  // Llama's keys; Qwen2Config has no attention_bias / mlp_bias, so that reads
  // as no biases, and the q, k, v biases are added here.
  for (const char* k : {"attention_bias", "mlp_bias"})
    TESSERA_CHECK(!c.contains(k), "config.json: '{}' is not a Qwen2 key (Qwen2's q, k and v always "
                                  "have biases, nothing else does)", k);
  GPTConfig m = model_from_llama_hf_config(c);
  TESSERA_CHECK(!config_boolean(c, "use_sliding_window", false),
                "config.json: use_sliding_window true (this engine computes full causal attention)");
  m.add_bias_linear = false;
  m.add_qkv_bias = true;
  m.validate();
  return m;
}

void export_hf_qwen2(const GPT& model, const std::string& out_dir, int32_t eot_id,
                     uint64_t max_shard_bytes) {
  export_llama_family(model, out_dir, llama_hf_pieces, qwen2_hf_config(model.config(), eot_id),
                      max_shard_bytes, "Qwen2");
}

void import_hf_qwen2(const std::string& weights, GPT& model) {
  import_llama_family(weights, model, llama_hf_pieces, "Qwen2");
}

}  // namespace tessera::ckpt

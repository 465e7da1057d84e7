#include "tessera/ckpt/hf_model.h"

#include <string>
#include <vector>

#include <fmt/core.h>

#include "tessera/ckpt/hf_gpt2.h"
#include "tessera/ckpt/hf_llama.h"
#include "tessera/ckpt/hf_mixtral.h"
#include "tessera/ckpt/hf_qwen2.h"
#include "tessera/ckpt/hf_qwen2_moe.h"
#include "tessera/config/model_fields.h"
#include "tessera/core/error.h"

namespace tessera::ckpt {

using nlohmann::json;

namespace {

// "a, b and c"
std::string listed(const std::vector<std::string>& xs) {
  std::string s;
  for (size_t i = 0; i < xs.size(); ++i)
    s += (i == 0 ? "" : i + 1 == xs.size() ? " and " : ", ") + xs[i];
  return s;
}

}  // namespace

namespace {

// An MoE model with Llama's block and no capacity is Mixtral's when it has
// no biases, no shared expert and renormalised gates; Qwen2-MoE's when it
// has q, k, v biases alone and a gated shared expert (any --moe-layer-freq:
// mlp_only_layers names the dense layers). Otherwise this names what each
// lacks.
HfArch moe_arch_of(const GPTConfig& m) {
  std::vector<std::string> block;  // what both need
  if (!m.rmsnorm()) block.push_back(fmt::format("{} RMSNorm", flag::normalization));
  if (!m.swiglu) block.push_back(flag::swiglu);
  if (!m.rope()) block.push_back(fmt::format("{} rope", flag::position_embedding));
  std::vector<std::string> mixtral = block, qwen = block;
  if (m.moe_layer_freq != 1) mixtral.push_back(fmt::format("{} 1", flag::moe_layer_freq));
  if (m.add_bias_linear) {
    mixtral.push_back(flag::disable_bias_linear);
    qwen.push_back(flag::disable_bias_linear);
  }
  if (m.add_qkv_bias) mixtral.push_back(fmt::format("no {}", flag::add_qkv_bias));
  if (!m.add_qkv_bias) qwen.push_back(flag::add_qkv_bias);
  if (!m.moe_dropless()) {
    mixtral.push_back(fmt::format("no {}", flag::moe_capacity_factor));
    qwen.push_back(fmt::format("no {}", flag::moe_capacity_factor));
  }
  if (m.moe_shared()) mixtral.push_back(fmt::format("no {}", flag::moe_shared_size));
  if (m.moe_router_pre_softmax) mixtral.push_back(fmt::format("no {}", flag::moe_router_pre_softmax));
  if (!m.moe_shared()) qwen.push_back(flag::moe_shared_size);
  if (!m.moe_shared() || !m.moe_shared_expert_gate) qwen.push_back(flag::moe_shared_gate);
  if (mixtral.empty()) return HfArch::Mixtral;
  if (qwen.empty()) return HfArch::Qwen2Moe;
  fail("no Hugging Face architecture holds this model ({}): Mixtral needs {}; Qwen2-MoE needs {}",
       m.summary(), listed(mixtral), listed(qwen));
}

}  // namespace

HfArch hf_arch_of(const GPTConfig& m) {
  if (m.moe()) return moe_arch_of(m);
  if (!m.llama_family()) return HfArch::Gpt2;
  // Llama's block: RMSNorm, SwiGLU and rotary positions, each required; GQA,
  // an untied head and biases are its options.
  const std::string rmsnorm = fmt::format("{} RMSNorm", flag::normalization);
  const std::string rope = fmt::format("{} rope", flag::position_embedding);
  std::vector<std::string> llama_lacks;
  if (!m.rmsnorm()) llama_lacks.push_back(rmsnorm);
  if (!m.swiglu) llama_lacks.push_back(flag::swiglu);
  if (!m.rope()) llama_lacks.push_back(rope);
  // Qwen2: Llama's block with biases on q, k and v alone.
  if (llama_lacks.empty()) return !m.add_bias_linear && m.add_qkv_bias ? HfArch::Qwen2 : HfArch::Llama;
  std::vector<std::string> gpt2_lacks;
  if (m.rmsnorm()) gpt2_lacks.push_back(rmsnorm);
  if (m.swiglu) gpt2_lacks.push_back(flag::swiglu);
  if (m.rope()) gpt2_lacks.push_back(rope);
  if (m.num_query_groups > 0) gpt2_lacks.push_back(flag::num_query_groups);
  if (m.untie_embeddings) gpt2_lacks.push_back(flag::untie_embeddings);
  if (!m.add_bias_linear) gpt2_lacks.push_back(flag::disable_bias_linear);
  fail("no Hugging Face architecture holds this model ({}): GPT-2 has no {}, and Llama needs {}",
       m.summary(), listed(gpt2_lacks), listed(llama_lacks));
}

HfArch hf_arch_of(const json& c) {
  TESSERA_CHECK(c.is_object(), "config.json: not a JSON object");
  std::string what;  // the key that decides, and its value
  if (c.contains("model_type")) {
    TESSERA_CHECK(c["model_type"].is_string(), "config.json: 'model_type' has the wrong type ({})",
                  c["model_type"].dump());
    const std::string t = c["model_type"];
    if (t == "gpt2") return HfArch::Gpt2;
    if (t == "llama") return HfArch::Llama;
    if (t == "mixtral") return HfArch::Mixtral;
    if (t == "qwen2") return HfArch::Qwen2;
    if (t == "qwen2_moe") return HfArch::Qwen2Moe;
    what = "model_type '" + t + "'";
  } else if (c.contains("architectures")) {
    const json& a = c["architectures"];
    TESSERA_CHECK(a.is_array() && a.size() == 1 && a[0].is_string(),
                  "config.json: 'architectures' is not a list of one name ({})", a.dump());
    const std::string t = a[0];
    if (t == "GPT2LMHeadModel" || t == "GPT2Model") return HfArch::Gpt2;
    if (t == "LlamaForCausalLM" || t == "LlamaModel") return HfArch::Llama;
    if (t == "MixtralForCausalLM" || t == "MixtralModel") return HfArch::Mixtral;
    if (t == "Qwen2ForCausalLM" || t == "Qwen2Model") return HfArch::Qwen2;
    if (t == "Qwen2MoeForCausalLM" || t == "Qwen2MoeModel") return HfArch::Qwen2Moe;
    what = "architectures " + a.dump();
  } else {
    return HfArch::Gpt2;
  }
  fail("config.json: {} (this engine imports GPT-2 (model_type gpt2), Llama (model_type llama), "
       "Mixtral (model_type mixtral), Qwen2 (model_type qwen2) and Qwen2-MoE (model_type "
       "qwen2_moe))",
       what);
}

const char* hf_arch_name(HfArch a) {
  switch (a) {
    case HfArch::Gpt2: return "GPT-2";
    case HfArch::Llama: return "Llama";
    case HfArch::Mixtral: return "Mixtral";
    case HfArch::Qwen2: return "Qwen2";
    case HfArch::Qwen2Moe: return "Qwen2-MoE";
  }
  return "?";
}

GPTConfig model_from_hf(const json& cfg) {
  switch (hf_arch_of(cfg)) {
    case HfArch::Gpt2: return model_from_hf_config(cfg);
    case HfArch::Llama: return model_from_llama_hf_config(cfg);
    case HfArch::Mixtral: return model_from_mixtral_hf_config(cfg);
    case HfArch::Qwen2: return model_from_qwen2_hf_config(cfg);
    case HfArch::Qwen2Moe: return model_from_qwen2_moe_hf_config(cfg);
  }
  fail("config.json: unknown architecture");
}

void export_hf(const GPT& model, const std::string& out_dir, int32_t eot_id,
               uint64_t max_shard_bytes) {
  switch (hf_arch_of(model.config())) {
    case HfArch::Gpt2: return export_hf_gpt2(model, out_dir, eot_id, max_shard_bytes);
    case HfArch::Llama: return export_hf_llama(model, out_dir, eot_id, max_shard_bytes);
    case HfArch::Mixtral: return export_hf_mixtral(model, out_dir, eot_id, max_shard_bytes);
    case HfArch::Qwen2: return export_hf_qwen2(model, out_dir, eot_id, max_shard_bytes);
    case HfArch::Qwen2Moe: return export_hf_qwen2_moe(model, out_dir, eot_id, max_shard_bytes);
  }
}

void import_hf(const std::string& path, GPT& model) {
  switch (hf_arch_of(model.config())) {
    case HfArch::Gpt2: return import_hf_gpt2(path, model);
    case HfArch::Llama: return import_hf_llama(path, model);
    case HfArch::Mixtral: return import_hf_mixtral(path, model);
    case HfArch::Qwen2: return import_hf_qwen2(path, model);
    case HfArch::Qwen2Moe: return import_hf_qwen2_moe(path, model);
  }
}

}  // namespace tessera::ckpt

#include "tessera/ckpt/hf_qwen2_moe.h"

#include <set>

#include <fmt/core.h>

#include "tessera/ckpt/hf_files.h"
#include "tessera/ckpt/hf_mixtral.h"
#include "tessera/ckpt/hf_qwen2.h"
#include "tessera/core/error.h"

namespace tessera::ckpt {

using nlohmann::json;

namespace {

// The MoE layers a Qwen2MoeConfig names: l not in mlp_only_layers and
// (l + 1) % decoder_sparse_step == 0 (Qwen2MoeDecoderLayer's rule).
std::set<int64_t> hf_moe_layers(const json& c, int64_t num_layers) {
  const int64_t step = c.contains("decoder_sparse_step") ? config_integer(c, "decoder_sparse_step") : 1;
  TESSERA_CHECK(step >= 1, "config.json: decoder_sparse_step {} (must be >= 1)", step);
  std::set<int64_t> dense;
  const json only = c.value("mlp_only_layers", json::array());
  TESSERA_CHECK(only.is_array(), "config.json: 'mlp_only_layers' is not a list ({})", only.dump());
  for (const json& l : only) {
    TESSERA_CHECK(l.is_number_integer(), "config.json: mlp_only_layers holds {} (not a layer index)",
                  l.dump());
    dense.insert(l.get<int64_t>());
  }
  std::set<int64_t> moe;
  for (int64_t l = 0; l < num_layers; ++l)
    if (!dense.count(l) && (l + 1) % step == 0) moe.insert(l);
  return moe;
}

// Our --moe-layer-freq whose MoE layers are `moe` (l % k == 0), or 0.
int64_t layer_freq_of(const std::set<int64_t>& moe, int64_t num_layers) {
  for (int64_t k = 1; k <= num_layers; ++k) {
    bool same = true;
    for (int64_t l = 0; l < num_layers && same; ++l)
      same = GPTConfig::is_moe_layer(l, k) == bool(moe.count(l));
    if (same) return k;
  }
  return 0;
}

}  // namespace

std::vector<HfPiece> qwen2_moe_hf_pieces(const std::string& ours, const GPTConfig& m) {
  std::string layer, rest;
  if (!split_layer(ours, &layer, &rest) || !rest.starts_with("mlp.") ||
      !m.moe_layer(std::stoll(layer)))
    return llama_hf_pieces(ours, m);  // embedding, attention, norms, head, a dense layer's MLP
  const std::string p = "model.layers." + layer + ".mlp.";
  const int64_t C = m.hidden_size, S = m.moe_shared_expert_intermediate_size;
  if (rest == "mlp.router.weight") return {{p + "gate.weight", 0, m.num_experts}};
  if (rest == "mlp.shared_expert.fc.weight")  // (2S, C): rows [gate | up]
    return {{p + "shared_expert.gate_proj.weight", 0, S}, {p + "shared_expert.up_proj.weight", S, S}};
  if (rest == "mlp.shared_expert.proj.weight") return {{p + "shared_expert.down_proj.weight", 0, C}};
  if (rest == "mlp.shared_expert_gate.weight") return {{p + "shared_expert_gate.weight", 0, 1}};
  return expert_pieces(ours, rest, p + "experts.", m, "gate_proj", "up_proj", "down_proj",
                       "Qwen2-MoE");
}

json qwen2_moe_hf_config(const GPTConfig& m, int32_t eot_id) {
  json c = qwen2_hf_config(m, eot_id);
  c["architectures"] = {"Qwen2MoeForCausalLM"};
  c["model_type"] = "qwen2_moe";
  c["num_experts"] = m.num_experts;
  c["num_experts_per_tok"] = m.moe_router_topk;
  c["norm_topk_prob"] = !m.moe_router_pre_softmax;
  // One width for the experts and the dense layers (hf_qwen2_moe.h).
  c["moe_intermediate_size"] = m.ffn();
  c["shared_expert_intermediate_size"] = m.moe_shared_expert_intermediate_size;
  c["decoder_sparse_step"] = 1;
  json dense = json::array();
  for (int64_t l = 0; l < m.num_layers; ++l)
    if (!m.moe_layer(l)) dense.push_back(l);
  c["mlp_only_layers"] = dense;
  // transformers' coefficient is top-k times smaller for the same loss (hf_mixtral.h).
  c["router_aux_loss_coef"] = std::stod(fmt::format("{}", m.moe_aux_coeff() / float(m.moe_router_topk)));
  c["output_router_logits"] = false;
  return c;
}

GPTConfig model_from_qwen2_moe_hf_config(const json& c) {
  GPTConfig m = model_from_qwen2_hf_config(c);  // attention, norms, sliding window refused
  m.num_experts = config_integer(c, "num_experts");
  TESSERA_CHECK(m.num_experts >= 1, "config.json: num_experts {} (an MoE file needs >= 1)",
                m.num_experts);
  m.moe_router_topk = config_integer(c, "num_experts_per_tok");
  // Qwen2MoeConfig's default is false: the full softmax's top-k as they are.
  m.moe_router_pre_softmax = !config_boolean(c, "norm_topk_prob", false);
  const std::set<int64_t> moe = hf_moe_layers(c, m.num_layers);
  TESSERA_CHECK(!moe.empty(),
                "config.json: decoder_sparse_step and mlp_only_layers leave no MoE layer among "
                "the {} layers",
                m.num_layers);
  m.moe_layer_freq = layer_freq_of(moe, m.num_layers);
  TESSERA_CHECK(m.moe_layer_freq > 0,
                "config.json: decoder_sparse_step {} and mlp_only_layers {} make layers {} MoE; "
                "this engine's --moe-layer-freq k makes the layers l % k == 0 MoE (layer 0 and "
                "every k-th)",
                c.value("decoder_sparse_step", json(1)).dump(),
                c.value("mlp_only_layers", json::array()).dump(), json(moe).dump());
  // The experts' width; the dense layers' (intermediate_size) must equal it.
  const int64_t moe_width = config_integer(c, "moe_intermediate_size");
  TESSERA_CHECK(moe_width >= 1, "config.json: moe_intermediate_size must be >= 1 (got {})", moe_width);
  const bool dense_layers = int64_t(moe.size()) < m.num_layers;
  TESSERA_CHECK(!dense_layers || moe_width == m.ffn_hidden_size,
                "config.json: intermediate_size {} but moe_intermediate_size {} with dense layers "
                "(mlp_only_layers / decoder_sparse_step): this engine's dense MLPs and experts "
                "have one width (--ffn-hidden-size)",
                m.ffn_hidden_size, moe_width);
  m.ffn_hidden_size = moe_width;
  const int64_t shared = config_integer(c, "shared_expert_intermediate_size");
  TESSERA_CHECK(shared >= 1,
                "config.json: shared_expert_intermediate_size {} (this engine's Qwen2-MoE has a "
                "shared expert of width >= 1)",
                shared);
  m.moe_shared_expert_intermediate_size = shared;
  m.moe_shared_expert_gate = true;  // Qwen2MoeSparseMoeBlock's sigmoid gate, always there
  m.moe_aux_loss_coeff =
      float(config_number(c, "router_aux_loss_coef", 0.001) * double(m.moe_router_topk));
  m.validate();
  return m;
}

void export_hf_qwen2_moe(const GPT& model, const std::string& out_dir, int32_t eot_id,
                         uint64_t max_shard_bytes) {
  export_llama_family(model, out_dir, qwen2_moe_hf_pieces, qwen2_moe_hf_config(model.config(), eot_id),
                      max_shard_bytes, "Qwen2-MoE");
}

void import_hf_qwen2_moe(const std::string& weights, GPT& model) {
  import_llama_family(weights, model, qwen2_moe_hf_pieces, "Qwen2-MoE");
}

}  // namespace tessera::ckpt

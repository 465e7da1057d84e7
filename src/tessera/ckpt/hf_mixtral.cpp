#include "tessera/ckpt/hf_mixtral.h"

#include <fmt/core.h>

#include "tessera/ckpt/hf_files.h"
#include "tessera/core/error.h"

namespace tessera::ckpt {

using nlohmann::json;

namespace {

// "h.N.mlp.<part>.weight" of an MoE layer -> "model.layers.N." and part;
// false for any other name.
bool split_moe(const std::string& ours, std::string* prefix, std::string* part) {
  std::string layer, rest;
  if (!split_layer(ours, &layer, &rest)) return false;
  for (const char* p : {"mlp.router.weight", "mlp.experts.fc.weight", "mlp.experts.proj.weight",
                        "mlp.experts.fc.bias", "mlp.experts.proj.bias"})
    if (rest == p) {
      *prefix = "model.layers." + layer + ".block_sparse_moe.";
      *part = rest;
      return true;
    }
  return false;
}

}  // namespace

std::vector<HfPiece> mixtral_hf_pieces(const std::string& ours, const GPTConfig& m) {
  std::string p, part;
  if (!split_moe(ours, &p, &part)) return llama_hf_pieces(ours, m);
  if (part == "mlp.router.weight") return {{p + "gate.weight", 0, m.num_experts}};
  return expert_pieces(ours, part, p + "experts.", m, "w1", "w3", "w2", "Mixtral");
}

std::vector<HfPiece> expert_pieces(const std::string& ours, const std::string& part,
                                   const std::string& experts, const GPTConfig& m,
                                   const char* gate, const char* up, const char* down,
                                   const char* family) {
  const int64_t E = m.num_experts, C = m.hidden_size, F = m.ffn();
  std::vector<HfPiece> pieces;
  for (int64_t j = 0; j < E; ++j) {
    const std::string x = fmt::format("{}{}.", experts, j);
    if (part == "mlp.experts.fc.weight") {  // (E, 2F, C): expert j's rows [gate | up]
      pieces.push_back({fmt::format("{}{}.weight", x, gate), j * 2 * F, F});
      pieces.push_back({fmt::format("{}{}.weight", x, up), j * 2 * F + F, F});
    } else if (part == "mlp.experts.proj.weight") {  // (E, C, F)
      pieces.push_back({fmt::format("{}{}.weight", x, down), j * C, C});
    } else {
      fail("no {} name for {} ({}'s experts have no biases)", family, ours, family);
    }
  }
  return pieces;
}

json mixtral_hf_config(const GPTConfig& m, int32_t eot_id) {
  json c = llama_hf_config(m, eot_id);
  // Keys MixtralConfig does not have (its linear layers never have biases).
  for (const char* k : {"attention_bias", "mlp_bias", "pretraining_tp", "rope_scaling"}) c.erase(k);
  c["architectures"] = {"MixtralForCausalLM"};
  c["model_type"] = "mixtral";
  c["num_local_experts"] = m.num_experts;
  c["num_experts_per_tok"] = m.moe_router_topk;
  c["router_aux_loss_coef"] = std::stod(fmt::format("{}", m.moe_aux_coeff() / float(m.moe_router_topk)));
  c["router_jitter_noise"] = 0.0;
  c["output_router_logits"] = false;
  c["sliding_window"] = nullptr;
  return c;
}

GPTConfig model_from_mixtral_hf_config(const json& c) {
  GPTConfig m = model_from_llama_hf_config(c);
  const json sw = c.value("sliding_window", json());
  TESSERA_CHECK(sw.is_null() || (sw.is_number_integer() && sw.get<int64_t>() >= m.seq_length),
                "config.json: sliding_window {} (this engine computes full causal attention over "
                "max_position_embeddings {})",
                sw.dump(), m.seq_length);
  const double jitter = config_number(c, "router_jitter_noise", 0.0);
  TESSERA_CHECK(jitter == 0.0, "config.json: router_jitter_noise {} (this engine's router adds no noise)",
                jitter);
  m.num_experts = config_integer(c, "num_local_experts");
  m.moe_router_topk = config_integer(c, "num_experts_per_tok");
  m.moe_layer_freq = 1;
  // transformers' coefficient is top-k times smaller for the same loss (hf_mixtral.h).
  m.moe_aux_loss_coeff = float(config_number(c, "router_aux_loss_coef", 0.001) * double(m.moe_router_topk));
  m.validate();
  return m;
}

void export_hf_mixtral(const GPT& model, const std::string& out_dir, int32_t eot_id,
                       uint64_t max_shard_bytes) {
  export_llama_family(model, out_dir, mixtral_hf_pieces, mixtral_hf_config(model.config(), eot_id),
                      max_shard_bytes, "Mixtral");
}

void import_hf_mixtral(const std::string& weights, GPT& model) {
  import_llama_family(weights, model, mixtral_hf_pieces, "Mixtral");
}

}  // namespace tessera::ckpt

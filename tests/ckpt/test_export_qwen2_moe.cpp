// Hugging Face Qwen2-MoE export/import (issue 35, item 6): the router's,
// experts' and gated shared expert's names and row blocks, the
// Qwen2MoeConfig both ways (norm_topk_prob as --moe-router-pre-softmax,
// decoder_sparse_step / mlp_only_layers as --moe-layer-freq, the widths)
// and the keys this engine refuses, Qwen1.5-MoE-A2.7B's config.json read
// into the planner preset's shape, and the export read by an independent
// PyTorch Qwen2-MoE (safetensors_reference.py: transformers'
// Qwen2MoeSparseMoeBlock from its definition; logits and loss to 1e-5) and
// imported back bit for bit, one file and sharded.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ckpt_test_util.h"
#include "expect_error.h"
#include "export_case.h"
#include "tessera/ckpt/hf_model.h"
#include "tessera/ckpt/hf_qwen2_moe.h"
#include "tessera/plan/model_presets.h"
#include "tiny_model.h"

namespace tessera {
namespace {

using namespace ckpt;
using nlohmann::json;
using test::Exported;
using test::ScratchDir;
using test::throws_error_with;

// tiny_llama with Qwen2's q, k, v biases, 4 experts top-2 and a gated shared
// expert of 48; a padded byte vocabulary (300 -> 384 rows); a large init so
// that routing is far from ties (fp32 and float64 choose the same experts).
GPTConfig qwen2_moe(bool pre_softmax, int64_t layers = 2, int64_t freq = 1) {
  GPTConfig m = test::tiny_llama(layers);
  m.vocab_size = 300;
  m.add_qkv_bias = true;
  m.num_experts = 4;
  m.moe_router_topk = 2;
  m.moe_router_pre_softmax = pre_softmax;
  m.moe_layer_freq = freq;
  m.moe_shared_expert_intermediate_size = 48;
  m.moe_shared_expert_gate = true;
  m.moe_aux_loss_coeff = 0.0f;  // the loss compared is the language-model loss alone
  m.init_std = 0.2f;
  m.rotary_base = 500.0f;
  return m;
}

TEST(HfQwen2Moe, RowBlocks) {
  const GPTConfig m = qwen2_moe(true, 3, 2);  // C 32, F 64, S 48, E 4; layers 0, 2 MoE
  auto p = qwen2_moe_hf_pieces("h.2.mlp.experts.fc.weight", m);
  ASSERT_EQ(p.size(), 8u);
  EXPECT_EQ(p[0].name, "model.layers.2.mlp.experts.0.gate_proj.weight");
  EXPECT_EQ(p[1].name, "model.layers.2.mlp.experts.0.up_proj.weight");
  EXPECT_EQ(p[7].name, "model.layers.2.mlp.experts.3.up_proj.weight");
  EXPECT_EQ(p[1].row0, 64);
  EXPECT_EQ(p[7].row0, 3 * 128 + 64);
  EXPECT_EQ(p[7].rows, 64);
  p = qwen2_moe_hf_pieces("h.0.mlp.experts.proj.weight", m);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[2].name, "model.layers.0.mlp.experts.2.down_proj.weight");
  EXPECT_EQ(p[2].row0, 2 * 32);
  p = qwen2_moe_hf_pieces("h.0.mlp.router.weight", m);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].name, "model.layers.0.mlp.gate.weight");
  EXPECT_EQ(p[0].rows, 4);
  p = qwen2_moe_hf_pieces("h.0.mlp.shared_expert.fc.weight", m);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].name, "model.layers.0.mlp.shared_expert.gate_proj.weight");
  EXPECT_EQ(p[1].name, "model.layers.0.mlp.shared_expert.up_proj.weight");
  EXPECT_EQ(p[1].row0, 48);
  EXPECT_EQ(p[1].rows, 48);
  EXPECT_EQ(qwen2_moe_hf_pieces("h.2.mlp.shared_expert.proj.weight", m)[0].name,
            "model.layers.2.mlp.shared_expert.down_proj.weight");
  p = qwen2_moe_hf_pieces("h.0.mlp.shared_expert_gate.weight", m);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].name, "model.layers.0.mlp.shared_expert_gate.weight");
  EXPECT_EQ(p[0].rows, 1);
  // A dense layer's MLP and the attention are Llama's / Qwen2's.
  EXPECT_EQ(qwen2_moe_hf_pieces("h.1.mlp.fc.weight", m)[1].name, "model.layers.1.mlp.up_proj.weight");
  EXPECT_EQ(qwen2_moe_hf_pieces("h.0.attn.qkv.bias", m)[2].name, "model.layers.0.self_attn.v_proj.bias");
}

TEST(HfQwen2Moe, ConfigBothWays) {
  GPTConfig m = qwen2_moe(true, 3, 2);
  m.moe_aux_loss_coeff = 0.02f;
  const json c = qwen2_moe_hf_config(m, 7);
  EXPECT_EQ(c["architectures"], json({"Qwen2MoeForCausalLM"}));
  EXPECT_EQ(c["model_type"], "qwen2_moe");
  EXPECT_EQ(c["num_experts"], 4);
  EXPECT_EQ(c["num_experts_per_tok"], 2);
  EXPECT_EQ(c["norm_topk_prob"], false);
  EXPECT_EQ(c["moe_intermediate_size"], 64);
  EXPECT_EQ(c["intermediate_size"], 64);
  EXPECT_EQ(c["shared_expert_intermediate_size"], 48);
  EXPECT_EQ(c["decoder_sparse_step"], 1);
  EXPECT_EQ(c["mlp_only_layers"], json({1}));
  EXPECT_EQ(c["router_aux_loss_coef"].get<double>(), 0.01);  // 0.02 / top-k (hf_mixtral.h)
  EXPECT_EQ(c["use_sliding_window"], false);
  EXPECT_FALSE(c.contains("mlp_bias"));
  EXPECT_EQ(hf_arch_of(c), HfArch::Qwen2Moe);
  EXPECT_EQ(hf_arch_of(m), HfArch::Qwen2Moe);
  EXPECT_STREQ(hf_arch_name(HfArch::Qwen2Moe), "Qwen2-MoE");
  const GPTConfig back = model_from_hf(c);
  EXPECT_EQ(back.summary(), m.summary());
  EXPECT_EQ(back.moe_layer_freq, 2);
  EXPECT_TRUE(back.moe_router_pre_softmax);
  EXPECT_TRUE(back.moe_shared_expert_gate);
  EXPECT_TRUE(back.add_qkv_bias);
  EXPECT_FALSE(back.add_bias_linear);
  EXPECT_FLOAT_EQ(back.moe_aux_loss_coeff, 0.02f);
  json by_arch = c;
  by_arch.erase("model_type");
  EXPECT_EQ(hf_arch_of(by_arch), HfArch::Qwen2Moe);
  json renorm = c;
  renorm["norm_topk_prob"] = true;
  EXPECT_FALSE(model_from_hf(renorm).moe_router_pre_softmax);
  // Every MoE layer but the last as mlp_only_layers + step: layer 0, 2 MoE by step 1 and [1].
  json all_moe = c;
  all_moe["mlp_only_layers"] = json::array();
  all_moe["intermediate_size"] = 5632;  // no dense layer reads it
  EXPECT_EQ(model_from_hf(all_moe).moe_layer_freq, 1);
  EXPECT_EQ(model_from_hf(all_moe).ffn(), 64);

  auto refused = [&](const char* key, const json& value, const std::vector<std::string>& needles) {
    json x = c;
    x[key] = value;
    return throws_error_with([&] { model_from_hf(x); }, needles);
  };
  EXPECT_TRUE(refused("use_sliding_window", true, {"config.json: use_sliding_window true"}));
  // (l + 1) % 2 == 0: layer 1 alone, which no --moe-layer-freq gives.
  json step2 = c;
  step2["decoder_sparse_step"] = 2;
  step2["mlp_only_layers"] = json::array();
  EXPECT_TRUE(throws_error_with(
      [&] { model_from_hf(step2); },
      {"config.json: decoder_sparse_step 2 and mlp_only_layers [] make layers [1] MoE"}));
  EXPECT_TRUE(refused("mlp_only_layers", json({0}),
                      {"config.json: decoder_sparse_step 1 and mlp_only_layers [0] make layers [1,2] MoE",
                       "--moe-layer-freq"}));
  EXPECT_TRUE(refused("mlp_only_layers", json({0, 1, 2}), {"leave no MoE layer"}));
  EXPECT_TRUE(refused("intermediate_size", 96,
                      {"config.json: intermediate_size 96 but moe_intermediate_size 64 with dense "
                       "layers", "--ffn-hidden-size"}));
  EXPECT_TRUE(refused("shared_expert_intermediate_size", 0,
                      {"config.json: shared_expert_intermediate_size 0"}));
  EXPECT_TRUE(refused("num_experts_per_tok", 5, {"--moe-router-topk"}));
  EXPECT_TRUE(refused("rope_scaling", json({{"type", "linear"}, {"factor", 2.0}}), {"rope_scaling"}));
}

// Qwen1.5-MoE-A2.7B's config.json (the hub's, keys that matter here) is
// the planner preset's shape: 60 experts top-4 of 1408, a gated shared
// expert of 5632, every layer MoE, q, k, v biases and norm_topk_prob
// false (--moe-router-pre-softmax).
TEST(HfQwen2Moe, Qwen15MoeA27bConfigIsThePlannerPreset) {
  const json c = json::parse(R"({
    "architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe",
    "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151643,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 5632, "max_position_embeddings": 8192, "max_window_layers": 21,
    "num_attention_heads": 16, "num_hidden_layers": 24, "num_key_value_heads": 16,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "use_cache": true,
    "use_sliding_window": false, "vocab_size": 151936, "decoder_sparse_step": 1,
    "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
    "num_experts_per_tok": 4, "num_experts": 60, "norm_topk_prob": false,
    "output_router_logits": false, "router_aux_loss_coef": 0.001})");
  const GPTConfig m = model_from_hf(c);
  EXPECT_EQ(m.num_layers, 24);
  EXPECT_EQ(m.num_experts, 60);
  EXPECT_EQ(m.moe_router_topk, 4);
  EXPECT_EQ(m.ffn(), 1408);
  EXPECT_EQ(m.moe_shared_expert_intermediate_size, 5632);
  EXPECT_TRUE(m.moe_shared_expert_gate);
  EXPECT_TRUE(m.moe_router_pre_softmax);
  EXPECT_EQ(m.moe_layer_freq, 1);
  EXPECT_TRUE(m.add_qkv_bias);
  EXPECT_FLOAT_EQ(m.moe_aux_loss_coeff, 0.004f);  // 0.001 x top-4
  const plan::ModelPreset* p = plan::find_preset("qwen1.5-moe-a2.7b");
  ASSERT_NE(p, nullptr);
  const GPTConfig& q = p->config;
  EXPECT_EQ(q.num_layers, m.num_layers);
  EXPECT_EQ(q.hidden_size, m.hidden_size);
  EXPECT_EQ(q.num_heads, m.num_heads);
  EXPECT_EQ(q.kv_heads(), m.kv_heads());
  EXPECT_EQ(q.vocab_size, m.vocab_size);
  EXPECT_EQ(q.ffn(), m.ffn());
  EXPECT_EQ(q.num_experts, m.num_experts);
  EXPECT_EQ(q.moe_router_topk, m.moe_router_topk);
  EXPECT_EQ(q.moe_layer_freq, m.moe_layer_freq);
  EXPECT_EQ(q.moe_shared_expert_intermediate_size, m.moe_shared_expert_intermediate_size);
  EXPECT_EQ(q.moe_shared_expert_gate, m.moe_shared_expert_gate);
  EXPECT_EQ(q.untie_embeddings, m.untie_embeddings);
  EXPECT_EQ(q.add_qkv_bias, m.add_qkv_bias);
  EXPECT_EQ(q.moe_router_pre_softmax, m.moe_router_pre_softmax);
  EXPECT_FLOAT_EQ(q.rotary_base, m.rotary_base);
}

TEST(HfQwen2Moe, MoeModelsNeitherHoldsAreRefusedNamingTheSettings) {
  GPTConfig no_gate = qwen2_moe(true);
  no_gate.moe_shared_expert_gate = false;
  EXPECT_TRUE(throws_error_with([&] { hf_arch_of(no_gate); },
                                {"no Hugging Face architecture holds this model",
                                 "Qwen2-MoE needs --moe-shared-expert-gate"}));
  GPTConfig capacity = qwen2_moe(false);
  capacity.moe_capacity_factor = 1.0f;
  EXPECT_TRUE(throws_error_with([&] { hf_arch_of(capacity); },
                                {"Qwen2-MoE needs no --moe-expert-capacity-factor"}));
  // Mixtral's gates are renormalised: a pre-softmax model without Qwen2-MoE's parts is refused.
  GPTConfig mixtral_pre = test::tiny_llama();
  mixtral_pre.num_experts = 4;
  mixtral_pre.moe_router_pre_softmax = true;
  EXPECT_TRUE(throws_error_with(
      [&] { hf_arch_of(mixtral_pre); },
      {"Mixtral needs no --moe-router-pre-softmax; Qwen2-MoE needs --add-qkv-bias, "
       "--moe-shared-expert-intermediate-size and --moe-shared-expert-gate"}));
}

struct Variant {
  const char* name;
  GPTConfig model;
  uint64_t max_shard_bytes;
};
class ExportQwen2Moe : public ::testing::TestWithParam<Variant> {};

TEST_P(ExportQwen2Moe, ReadByPyTorchAndImportedBackBitForBit) {
  ScratchDir dir(std::string("export_qwen2_moe_") + GetParam().name);
  Exported x(GetParam().model);
  test::expect_reference_and_round_trip(x, dir, "Qwen2-MoE", GetParam().max_shard_bytes);
}

GPTConfig tied(GPTConfig m) {
  m.untie_embeddings = false;
  return m;
}

INSTANTIATE_TEST_SUITE_P(
    Variants, ExportQwen2Moe,
    ::testing::Values(
        // norm_topk_prob false (Qwen1.5-MoE's), experts in every layer.
        Variant{"PreSoftmax", qwen2_moe(true), 0},
        // norm_topk_prob true, layers 0 and 2 MoE and 1 dense (mlp_only_layers
        // [1]), a tied head, written as shards of at most 64 KB.
        Variant{"RenormalisedEveryOtherLayerShardedTied", tied(qwen2_moe(false, 3, 2)), 64 << 10}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tessera

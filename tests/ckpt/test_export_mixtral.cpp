// Hugging Face Mixtral export/import (issue 35, item 6): the experts' names
// and row blocks, the MixtralConfig both ways (the router's aux-loss
// coefficient converted between Megatron's and transformers' scales) and
// the keys this engine refuses, the export read by an independent PyTorch
// Mixtral (safetensors_reference.py: transformers' sparse MoE block from
// its definition; logits and loss to 1e-5) and imported back bit for bit,
// and MoE models Mixtral cannot hold, refused naming the setting.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ckpt_test_util.h"
#include "expect_error.h"
#include "export_case.h"
#include "tessera/ckpt/hf_mixtral.h"
#include "tessera/ckpt/hf_model.h"
#include "tiny_model.h"

namespace tessera {
namespace {

using namespace ckpt;
using nlohmann::json;
using test::Exported;
using test::ScratchDir;
using test::throws_error_with;

// tiny_llama with 4 experts, top-2, in every layer; a padded byte
// vocabulary (300 -> 384 rows); a large init so that routing is far from
// ties (fp32 and float64 choose the same experts).
GPTConfig mixtral(bool untied) {
  GPTConfig m = test::tiny_llama();
  m.vocab_size = 300;
  m.untie_embeddings = untied;
  m.num_experts = 4;
  m.moe_router_topk = 2;
  m.moe_aux_loss_coeff = 0.0f;  // the loss compared is the language-model loss alone
  m.init_std = 0.2f;
  m.rotary_base = 500.0f;
  return m;
}

TEST(HfMixtral, ExpertRowBlocks) {
  const GPTConfig m = mixtral(true);  // C 32, F 64, E 4
  auto p = mixtral_hf_pieces("h.1.mlp.experts.fc.weight", m);
  ASSERT_EQ(p.size(), 8u);
  EXPECT_EQ(p[0].name, "model.layers.1.block_sparse_moe.experts.0.w1.weight");
  EXPECT_EQ(p[1].name, "model.layers.1.block_sparse_moe.experts.0.w3.weight");
  EXPECT_EQ(p[6].name, "model.layers.1.block_sparse_moe.experts.3.w1.weight");
  EXPECT_EQ(p[1].row0, 64);
  EXPECT_EQ(p[6].row0, 3 * 128);
  EXPECT_EQ(p[7].row0, 3 * 128 + 64);
  EXPECT_EQ(p[7].rows, 64);
  p = mixtral_hf_pieces("h.0.mlp.experts.proj.weight", m);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[2].name, "model.layers.0.block_sparse_moe.experts.2.w2.weight");
  EXPECT_EQ(p[2].row0, 2 * 32);
  EXPECT_EQ(p[2].rows, 32);
  p = mixtral_hf_pieces("h.0.mlp.router.weight", m);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].name, "model.layers.0.block_sparse_moe.gate.weight");
  EXPECT_EQ(p[0].rows, 4);
  // Everything else is Llama's.
  EXPECT_EQ(mixtral_hf_pieces("h.1.attn.proj.weight", m)[0].name, "model.layers.1.self_attn.o_proj.weight");
  EXPECT_THROW(mixtral_hf_pieces("h.0.mlp.experts.fc.bias", m), Error);
}

TEST(HfMixtral, ConfigBothWays) {
  GPTConfig m = mixtral(true);
  m.moe_aux_loss_coeff = 0.02f;
  const json c = mixtral_hf_config(m, 7);
  EXPECT_EQ(c["architectures"], json({"MixtralForCausalLM"}));
  EXPECT_EQ(c["model_type"], "mixtral");
  EXPECT_EQ(c["num_local_experts"], 4);
  EXPECT_EQ(c["num_experts_per_tok"], 2);
  EXPECT_EQ(c["router_aux_loss_coef"].get<double>(), 0.01);  // 0.02 / top-k (hf_mixtral.h)
  EXPECT_TRUE(c["sliding_window"].is_null());
  EXPECT_FALSE(c.contains("mlp_bias"));
  EXPECT_EQ(hf_arch_of(c), HfArch::Mixtral);
  EXPECT_EQ(hf_arch_of(m), HfArch::Mixtral);
  const GPTConfig back = model_from_hf(c);
  EXPECT_EQ(back.summary(), m.summary());
  EXPECT_EQ(back.num_experts, 4);
  EXPECT_EQ(back.moe_router_topk, 2);
  EXPECT_FLOAT_EQ(back.moe_aux_loss_coeff, 0.02f);
  EXPECT_TRUE(back.moe_dropless());
  json by_arch = c;
  by_arch.erase("model_type");
  EXPECT_EQ(hf_arch_of(by_arch), HfArch::Mixtral);

  auto refused = [&](const char* key, const json& value, const std::vector<std::string>& needles) {
    json x = c;
    x[key] = value;
    return throws_error_with([&] { model_from_hf(x); }, needles);
  };
  EXPECT_TRUE(refused("sliding_window", 4, {"config.json: sliding_window 4", "full causal attention"}));
  EXPECT_TRUE(refused("router_jitter_noise", 0.01, {"config.json: router_jitter_noise 0.01"}));
  EXPECT_TRUE(refused("num_experts_per_tok", 5, {"--moe-router-topk"}));
  json long_window = c;
  long_window["sliding_window"] = 4096;  // longer than the sequence: no window in effect
  EXPECT_EQ(model_from_hf(long_window).summary(), m.summary());
}

TEST(HfMixtral, MoeModelsMixtralCannotHoldAreRefusedNamingTheSetting) {
  GPTConfig gpt = test::tiny_gpt();
  gpt.num_experts = 4;
  EXPECT_TRUE(throws_error_with([&] { hf_arch_of(gpt); },
                                {"no Hugging Face architecture holds this model", "Mixtral needs "
                                 "--normalization RMSNorm, --swiglu, --position-embedding-type "
                                 "rope and --disable-bias-linear"}));
  GPTConfig every_other = mixtral(true);
  every_other.moe_layer_freq = 2;
  EXPECT_TRUE(throws_error_with([&] { hf_arch_of(every_other); }, {"Mixtral needs --moe-layer-freq 1"}));
  GPTConfig capacity = mixtral(true);
  capacity.moe_capacity_factor = 1.0f;
  EXPECT_TRUE(throws_error_with([&] { hf_arch_of(capacity); },
                                {"Mixtral needs no --moe-expert-capacity-factor"}));
}

struct Variant {
  const char* name;
  GPTConfig model;
};
class ExportMixtral : public ::testing::TestWithParam<Variant> {};

TEST_P(ExportMixtral, ReadByPyTorchAndImportedBackBitForBit) {
  ScratchDir dir(std::string("export_mixtral_") + GetParam().name);
  Exported x(GetParam().model);
  test::expect_reference_and_round_trip(x, dir, "Mixtral");
}

INSTANTIATE_TEST_SUITE_P(Variants, ExportMixtral,
                         ::testing::Values(Variant{"Untied", mixtral(true)},
                                           Variant{"Tied", mixtral(false)}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tessera

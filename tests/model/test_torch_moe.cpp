// The MoE layer against PyTorch (torch_moe_reference.py, float64, Debian's
// /usr/bin/python3): a tiny MoE GPT (4 experts, top-2, aux loss and
// z-loss) must give the same logits, step-1 loss, routing stats and every
// parameter gradient to 1e-5 relative in fp32; variants with a capacity
// factor that drops tokens, SwiGLU experts without biases (the Llama
// family), experts in every other layer only, load balancing off and per
// sequence (seq_aux_loss), a shared expert with and without its gate,
// --moe-router-pre-softmax (gates the full softmax's top-k, not
// renormalised: Qwen2-MoE's norm_topk_prob false; with a capacity and in
// Qwen2-MoE's shape, SwiGLU with a gated shared expert). The trainer's step then
// reports the routing in its metrics.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "tessera/config/model_fields.h"
#include "tessera/core/rng.h"
#include "tessera/kernels/moe_stats.h"
#include "tessera/train/trainer.h"
#include "fixed_batches.h"
#include "tiny_model.h"
#include "torch_dump.h"
#include "torch_manifest.h"

namespace tessera {
namespace {

using test::FixedBatches;
using test::write_floats;

struct Variant {
  const char* name;
  GPTConfig model;
};

GPTConfig moe(GPTConfig m) {
  m.num_experts = 4;
  m.moe_router_topk = 2;
  m.moe_aux_loss_coeff = 0.1f;  // large enough that a wrong aux gradient shows
  m.moe_z_loss_coeff = 0.01f;
  m.init_std = 0.2f;  // routing far from ties, so fp32 and float64 choose alike
  return m;
}

std::vector<Variant> variants() {
  GPTConfig capacity = moe(test::tiny_gpt());
  // 32 tokens x 2 choices over 4 experts: 16 each at factor 1; 0.5 keeps 8.
  capacity.moe_capacity_factor = 0.5f;
  GPTConfig every_other = moe(test::tiny_gpt(3));
  every_other.moe_layer_freq = 2;  // layers 0 and 2 MoE, 1 dense
  GPTConfig no_balancing = moe(test::tiny_gpt());
  no_balancing.moe_load_balancing = MoeLoadBalancing::None;  // the z-loss alone
  GPTConfig per_sequence = moe(test::tiny_gpt());
  per_sequence.moe_load_balancing = MoeLoadBalancing::SeqAuxLoss;
  // A shared expert (--moe-shared-expert-intermediate-size) of another
  // width than the routed ones; with its sigmoid gate (Qwen2-MoE), also
  // beside dense layers (every other layer) and with SwiGLU.
  GPTConfig shared = moe(test::tiny_gpt());
  shared.moe_shared_expert_intermediate_size = 48;
  GPTConfig shared_gate = every_other;
  shared_gate.moe_shared_expert_intermediate_size = 40;
  shared_gate.moe_shared_expert_gate = true;
  GPTConfig llama_shared_gate = moe(test::tiny_llama());
  llama_shared_gate.moe_shared_expert_intermediate_size = 64;
  llama_shared_gate.moe_shared_expert_gate = true;
  GPTConfig pre_softmax = capacity;  // the gates of dropped and kept choices alike
  pre_softmax.moe_router_pre_softmax = true;
  GPTConfig qwen2_moe = llama_shared_gate;  // Qwen2-MoE's layer, top-4 of 8 (Qwen1.5-MoE: 4 of 60)
  qwen2_moe.moe_router_pre_softmax = true;
  qwen2_moe.num_experts = 8;
  qwen2_moe.moe_router_topk = 4;
  qwen2_moe.add_bias_linear = false;
  qwen2_moe.add_qkv_bias = true;
  return {{"Gpt", moe(test::tiny_gpt())},
          {"PreSoftmaxCapacity", pre_softmax},
          {"Qwen2MoePreSoftmax", qwen2_moe},
          {"GptSharedExpert", shared},
          {"EveryOtherLayerSharedGate", shared_gate},
          {"LlamaSharedExpertGate", llama_shared_gate},
          {"GptCapacityDrops", capacity},
          {"LlamaSwiglu", moe(test::tiny_llama())},
          {"EveryOtherLayer", every_other},
          {"NoLoadBalancing", no_balancing},
          {"SeqAuxLoss", per_sequence}};
}

class TorchMoe : public ::testing::TestWithParam<Variant> {};

TEST_P(TorchMoe, LogitsLossStatsAndGradients) {
  TrainConfig cfg;
  cfg.model = GetParam().model;
  cfg.par.micro_batch = 2;
  cfg.par.global_batch = 4;  // two accumulation steps
  cfg.train_iters = 2;
  cfg.seed = 7;
  cfg.peak_tflops = 1;
  cfg.validate(1);

  const int64_t B = cfg.par.micro_batch, T = cfg.model.seq_length, V = cfg.model.vocab_size;
  const int64_t rows = cfg.par.global_batch * cfg.train_iters;
  std::vector<int32_t> tokens(size_t(rows * (T + 1)));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(rng_u64(99, 0, i) % uint64_t(V));
  FixedBatches data(tokens, rows, V);
  Trainer trainer(cfg, data);
  GPT& model = trainer.model();

  const test::TorchDump dir(std::string("torch_moe_") + GetParam().name);
  write_floats(dir / "params.f32", model.params().f32(), model.params().numel());

  Activations acts;
  const ActShape shape = model.act_shape(B, T);
  activations_init(acts, shape);
  std::vector<int32_t> window(size_t(B * (T + 1))), in(size_t(B * T)), tgt(size_t(B * T));
  const float dloss = 1.0f / float(cfg.par.global_batch * T);
  double loss_sum = 0;
  nlohmann::json stats = nlohmann::json::array();  // per micro-batch, per MoE layer: aux, z, dropped
  int64_t dropped = 0;
  for (int64_t k = 0; k < 2; ++k) {
    data.fill(Split::Train, k * B, B, T, window.data());
    test::split_window(window.data(), B, T, in.data(), tgt.data());
    loss_sum += model.forward(acts, in.data(), tgt.data());
    if (k == 0) write_floats(dir / "logits.f32", acts.logits, B * T * V);
    nlohmann::json layers = nlohmann::json::array();
    for (size_t l = 0; l < acts.layers.size(); ++l) {
      if (!model.weights().layers[l].moe()) continue;
      const float* st = acts.layers[l].moe.stats;
      layers.push_back({st[kernels::kMoeAuxLoss], st[kernels::kMoeZLoss],
                        int64_t(st[kernels::kMoeDropped])});
      dropped += int64_t(st[kernels::kMoeDropped]);
    }
    stats.push_back(layers);
    model.backward(acts, in.data(), tgt.data(), dloss);
  }
  write_floats(dir / "grads.f32", model.grads().f32(), model.grads().numel());
  model.grads().zero();
  if (GetParam().model.moe_dropless())
    EXPECT_EQ(dropped, 0);
  else
    EXPECT_GT(dropped, 0) << "the capacity variant must drop tokens to test dropping";

  nlohmann::json m = test::torch_manifest(cfg, model, tokens);
  m["loss_step1"] = loss_sum / 2;
  m["moe_stats"] = stats;
  const GPTConfig& mc = cfg.model;
  m["config"]["num_experts"] = mc.num_experts;
  m["config"]["moe_layer_freq"] = mc.moe_layer_freq;
  m["config"]["topk"] = mc.moe_router_topk;
  m["config"]["pre_softmax"] = mc.moe_router_pre_softmax;
  m["config"]["capacity"] = shape.capacity;
  m["config"]["aux_coeff"] = mc.moe_aux_loss_coeff;
  m["config"]["z_coeff"] = mc.moe_z_loss_coeff;
  m["config"]["load_balancing"] = field_text(model_field(flag::moe_load_balancing), mc).value();
  std::ofstream(dir / "manifest.json") << m.dump();

  // The trainer's step reports the routing of its micro-batches.
  const StepStats st = trainer.train_step(1);
  EXPECT_TRUE(st.moe);
  EXPECT_GT(st.moe_aux_loss, 0.0);
  EXPECT_GT(st.moe_z_loss, 0.0);
  EXPECT_EQ(st.moe_imbalance.size(), size_t((mc.num_layers + mc.moe_layer_freq - 1) / mc.moe_layer_freq));
  for (const auto& [layer, v] : st.moe_imbalance) EXPECT_GE(v, 1.0) << "layer " << layer;
  EXPECT_EQ(st.moe_dropped > 0, !mc.moe_dropless());

  dir.check_with("torch_moe_reference.py");
}

INSTANTIATE_TEST_SUITE_P(Moe, TorchMoe, ::testing::ValuesIn(variants()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tessera

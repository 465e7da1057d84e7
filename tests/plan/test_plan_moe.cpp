// The planner's mixture of experts (issue 35 item 7; plan/moe_cost.h,
// plan/moe_report.h): presets with their public sizes, an MoE layer's
// activations and work beyond the dense layer's, capacity padding, the
// all-to-all of expert parallelism on the node hierarchy, the imbalance a
// run measured, and a plan of Mixtral on 64 H100s that explains its ep.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "temp_file.h"
#include "tessera/model/flops.h"
#include "tessera/model/param_layout.h"
#include "tessera/plan/layer_ops.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/memory_model.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/moe_cost.h"
#include "tessera/plan/moe_report.h"
#include "tessera/plan/param_counter.h"
#include "tessera/plan/run_metrics.h"
#include "tessera/plan/search.h"
#include "tessera/plan/system.h"

using namespace tessera;
using namespace tessera::plan;

namespace {

PlanLayout layout(int64_t tp, int64_t pp, int64_t dp) {
  PlanLayout L;
  L.par.tp = tp;
  L.par.pp = pp;
  L.par.dp = dp;
  L.par.micro_batch = 1;
  L.par.global_batch = dp * 4;
  return L;
}

double billions(const char* preset) {
  return double(ParamCounter(find_preset(preset)->config).model_params()) / 1e9;
}

}  // namespace

TEST(PlanMoe, PresetsHaveTheirPublishedSizes) {
  // Mixtral's model cards: 46.7B and 141B parameters.
  EXPECT_NEAR(billions("mixtral-8x7b"), 46.7, 0.3);
  EXPECT_NEAR(billions("mixtral-8x22b"), 141.0, 1.5);
  // Qwen1.5-MoE-A2.7B: 14.3B; DeepSeek-V2-Lite: 15.7B (approximated: MLA as
  // MHA, its dense first layer as MoE; model_presets.cpp says how).
  EXPECT_NEAR(billions("qwen1.5-moe-a2.7b"), 14.3, 0.5);
  EXPECT_NEAR(billions("deepseek-v2-lite"), 15.7, 1.0);
  const GPTConfig& m = find_preset("mixtral-8x7b")->config;
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_EQ(m.moe_router_topk, 2);
}

// The shared expert (--moe-shared-expert-intermediate-size S, its gate):
// Qwen1.5-MoE-A2.7B's preset holds it as the engine runs it, and the
// planner prices its parameters (ParamLayout), its FLOPs (a dense MLP of
// width S on every token, and the gate), its GEMMs in the traced op list
// and its activations.
TEST(PlanMoe, SharedExpertIsPriced) {
  const GPTConfig& qwen = find_preset("qwen1.5-moe-a2.7b")->config;
  EXPECT_EQ(qwen.num_experts, 60);
  EXPECT_EQ(qwen.moe_router_topk, 4);
  EXPECT_EQ(qwen.moe_shared_expert_intermediate_size, 5632);
  EXPECT_TRUE(qwen.moe_shared_expert_gate);
  GPTConfig none = qwen;
  none.moe_shared_expert_intermediate_size = 0;
  none.moe_shared_expert_gate = false;
  // Parameters: 3 C S (SwiGLU, no biases) and the gate's C, per layer.
  const double C = double(qwen.hidden_size), S = 5632, L = double(qwen.num_layers);
  EXPECT_DOUBLE_EQ(double(ParamCounter(qwen).model_params() - ParamCounter(none).model_params()),
                   L * (3 * C * S + C));
  // FLOPs: forward 2 x 3 C S + 2 C per token and layer, x 3 for the step.
  const int64_t T = qwen.seq_length;
  const double flops = step_flops(qwen, 1, Recompute::None, ScheduleKind::OneFOneB).model -
                       step_flops(none, 1, Recompute::None, ScheduleKind::OneFOneB).model;
  EXPECT_NEAR(flops, 3 * L * double(T) * (2 * 3 * C * S + 2 * C), 1e-6 * flops);
  // The op list's GEMMs (what the engine runs): the shared expert's two.
  const SystemSpec sys = load_system("h100");
  const PlanLayout one = layout(1, 1, 1);
  EXPECT_GT(layer_ops(qwen, sys, one).forward[Op::Gemm], layer_ops(none, sys, one).forward[Op::Gemm]);
  // Activations: Korthikanti's form and the engine's own arena.
  EXPECT_GT(korthikanti_layer_bytes(qwen, 1, 1, false, Recompute::None, true),
            korthikanti_layer_bytes(none, 1, 1, false, Recompute::None, true));
  const auto arena = [&](const GPTConfig& m) {
    return activations_bytes(engine_shape(m, 1, 1, 2, false, false, Recompute::None));
  };
  // Per MoE layer at least its fc output, activation (S and 2 S wide, 4
  // bytes each in fp32) and gated output kept (C).
  EXPECT_GE(double(arena(qwen) - arena(none)), 2 * double(T) * (3 * S + C) * 4);
}

TEST(PlanMoe, ActivationsGrowWithTopKAndCapacity) {
  GPTConfig dense = find_preset("llama-3-8b")->config;
  GPTConfig moe = dense;
  moe.num_experts = 8;
  moe.moe_router_topk = 2;
  const double d = korthikanti_layer_bytes(dense, 1, 1, false, Recompute::None, true);
  const double k2 = korthikanti_layer_bytes(moe, 1, 1, false, Recompute::None, true);
  EXPECT_GT(k2, d);
  moe.moe_router_topk = 4;
  EXPECT_GT(korthikanti_layer_bytes(moe, 1, 1, false, Recompute::None, true), k2);
  // A capacity factor pads every expert to E x capacity rows.
  moe.moe_router_topk = 2;
  moe.moe_capacity_factor = 1.5f;
  EXPECT_NEAR(moe_row_factor(moe, 8192), 1.5, 1e-3);
  EXPECT_GT(korthikanti_layer_bytes(moe, 1, 1, false, Recompute::None, true), k2);
  // Full recompute keeps only the layer's input, MoE or not.
  EXPECT_DOUBLE_EQ(korthikanti_layer_bytes(moe, 1, 1, false, Recompute::Full, true),
                   korthikanti_layer_bytes(dense, 1, 1, false, Recompute::Full, true));
}

TEST(PlanMoe, ExpertGemmsCostTopKDenseMlps) {
  const SystemSpec sys = load_system("h100");
  GPTConfig dense = find_preset("llama-3-8b")->config;
  GPTConfig moe = dense;
  moe.num_experts = 8;
  moe.moe_router_topk = 2;
  const PlanLayout L = layout(1, 1, 1);
  const double d = layer_ops(dense, sys, L).forward[Op::Gemm];
  const double m = layer_ops(moe, sys, L).forward[Op::Gemm];
  // Attention's GEMMs once, the MLP's twice (and the router): between 1.5x and 2x.
  EXPECT_GT(m, 1.5 * d);
  EXPECT_LT(m, 2.0 * d);
}

TEST(PlanMoe, AllToAllOnTheNodeHierarchy) {
  const SystemSpec sys = load_system("h100");
  const GPTConfig& m = find_preset("mixtral-8x7b")->config;
  PlanLayout L = layout(1, 1, 64);
  EXPECT_EQ(moe_all_to_all(m, sys, L, 1, 1).forward, 0.0);
  const MoeAllToAll in_node = moe_all_to_all(m, sys, L, 8, 1);
  const MoeAllToAll across = moe_all_to_all(m, sys, L, 8, 8);  // 8 ranks 8 apart: 8 nodes
  EXPECT_GT(in_node.forward, 0.0);
  EXPECT_GT(across.forward, 2 * in_node.forward);
  EXPECT_DOUBLE_EQ(in_node.forward, in_node.backward);
  // The slowest expert-parallel rank: the measured imbalance, at most ep.
  EXPECT_EQ(moe_imbalance_factor(1.7, 1), 1.0);
  EXPECT_EQ(moe_imbalance_factor(1.7, 8), 1.7);
  EXPECT_EQ(moe_imbalance_factor(30.0, 4), 4.0);
}

TEST(PlanMoe, MixtralOn64H100sPlansAndExplainsItsEp) {
  const SystemSpec sys = load_system("h100");
  const ModelPreset& p = *find_preset("mixtral-8x7b");
  SearchSpace sp;
  sp.devices = 64;
  sp.global_batch = p.global_batch;
  const SearchResult r = search_layouts(p.config, sys, sp);
  ASSERT_FALSE(r.ranked.empty());
  const LayoutCost& best = r.ranked.front();
  EXPECT_TRUE(best.fits);
  EXPECT_NE(best.layout.par.schedule, ScheduleKind::ZeroBubbleH1);  // the engine refuses it for MoE
  const std::string report = moe_ep_report(p.config, sys, best);
  EXPECT_NE(report.find("mixture of experts: 8 experts, top 2"), std::string::npos) << report;
  EXPECT_NE(report.find("all-to-all"), std::string::npos) << report;
  EXPECT_EQ(moe_ep_report(find_preset("llama-3-8b")->config, sys, best), "");
}

TEST(PlanMoe, MetricsCarryTheImbalance) {
  const std::string path = write_temp(
      "moe_metrics.jsonl",
      R"({"run": {"model": {"num_layers": 2, "hidden_size": 64, "num_heads": 4, "seq_length": 32,)"
      R"( "vocab_size": 512, "num_experts": 4, "moe_router_topk": 2}, "parallel": {"tp": 1, "pp": 1,)"
      R"( "dp": 1, "micro_batch": 4, "global_batch": 8}}})"
      "\n{\"step\": 1, \"step_seconds\": 0.1, \"moe_imbalance\": {\"0\": 1.5, \"1\": 1.25}}"
      "\n{\"step\": 2, \"step_seconds\": 0.1, \"moe_imbalance\": {\"0\": 1.25, \"1\": 1.1}}"
      "\n{\"step\": 3, \"step_seconds\": 0.1}\n");
  const RunMetrics r = read_run_metrics(path);
  ASSERT_EQ(r.moe_imbalance.size(), 3u);
  EXPECT_EQ(r.moe_imbalance[0], 1.5);
  EXPECT_TRUE(std::isnan(r.moe_imbalance[2]));
  EXPECT_DOUBLE_EQ(median_moe_imbalance(r, 0), 1.375);
}

TEST(PlanMoe, ExpertStateSplitsOverExpertParallelRanks) {
  const GPTConfig& m = find_preset("mixtral-8x7b")->config;
  PlanLayout L = layout(1, 4, 16);
  L.par.zero_stage = 1;
  EXPECT_EQ(moe_ep(L), 1);
  ParamCounter params(m);
  const double stage = double(params.stage_params(L.par, 0));
  const StateBytesPerParam per = state_bytes_per_param(Precision::Bf16);
  const MemoryBytes one = moe_stage_state(params, L.par, 0, per, 1);
  const MemoryBytes four = moe_stage_state(params, L.par, 0, per, 4);
  // ep 1: the plain ZeRO formula, exactly.
  const MemoryBytes plain = zero_state_bytes(stage, per, 1, 16);
  EXPECT_EQ(one.total(), plain.total());
  // ep 4: a quarter of the expert weights and gradients; the optimizer
  // state the same (a quarter of the experts over a quarter of the ranks).
  const double experts = moe_stage_expert_params(m, L.par, 0);
  EXPECT_NEAR(one.params - four.params, 0.75 * experts * per.params, 1e-6 * one.params);
  EXPECT_NEAR(four.optimizer, one.optimizer, 1e-6 * one.optimizer);
  // The engine's layout at ep 4 (ep rank 0 of 4): dense units over 16 ranks,
  // its expert units over 4, padding and all.
  ParallelConfig p4 = L.par;
  p4.ep = 4;
  const ParamLayout rank = ParamLayout::build(m, p4, 0, 0);
  const double e4 = double(rank.expert_numel()), d4 = double(rank.numel()) - e4;
  EXPECT_EQ(four.params, (d4 + e4) * per.params);
  EXPECT_EQ(four.optimizer, d4 * per.optimizer / 16 + e4 * per.optimizer / 4);
  // 8 layers of 8 experts of 3 x 4096 x 14336 on the first of 4 stages.
  EXPECT_NEAR(experts, 8.0 * 8 * 3 * 4096 * 14336, 1.0);
}

TEST(PlanMoe, SearchTriesEveryExpertParallelSizeTheEngineAccepts) {
  const SystemSpec sys = load_system("h100");
  const GPTConfig& m = find_preset("mixtral-8x7b")->config;
  SearchSpace sp;
  sp.devices = 16;
  sp.global_batch = 64;
  sp.tp = {1};
  sp.pp = {4};
  sp.micro_batch = {1};
  std::set<int64_t> eps;
  for (const PlanLayout& L : enumerate_layouts(m, sys, sp)) {
    eps.insert(L.par.ep);
    EXPECT_NO_THROW(L.par.validate(m, sp.devices)) << L.str();
  }
  EXPECT_EQ(eps, (std::set<int64_t>{1, 2, 4}));  // dp x cp = 4
  // A search of the engine's own runs (--config, tessera tune) tries them
  // too: the engine shards the experts over ep (ep is a layout and trial key).
  EXPECT_TRUE(ep_in_engine_trials());
  sp.engine = true;
  eps.clear();
  for (const PlanLayout& L : enumerate_layouts(m, sys, sp)) eps.insert(L.par.ep);
  EXPECT_EQ(eps, (std::set<int64_t>{1, 2, 4}));
  // ep 2's layer waits for its all-to-all; ep 1's has none.
  PlanLayout one = layout(1, 4, 4), two = one;
  two.par.ep = 2;
  const LayoutCost a = evaluate_layout(m, sys, one), b = evaluate_layout(m, sys, two);
  EXPECT_GT(b.time.tp_comm, a.time.tp_comm);
  EXPECT_LT(b.peak_memory, a.peak_memory);
}

// Experts under tensor parallelism, as the engine runs them: each expert's
// fc and proj split over tp (its proj bias whole), the count matching
// ParamLayout's on a tp rank, the routing's activations whole on each tp
// rank, and a search of the engine's own runs trying tp > 1.
TEST(PlanMoe, ExpertsSplitOverTensorParallelRanks) {
  GPTConfig m = find_preset("mixtral-8x7b")->config;
  EXPECT_DOUBLE_EQ(moe_expert_params(m, 2), moe_expert_params(m) / 2);  // no biases
  m.add_bias_linear = true;
  const double h = double(m.hidden_size);
  EXPECT_DOUBLE_EQ(moe_expert_params(m, 4), (moe_expert_params(m) - h) / 4 + h);
  // ParamLayout's layer 0 on tp rank 0 of 4: the experts' three tensors.
  ParallelConfig par;
  par.tp = 4;
  const ParamLayout L = ParamLayout::build(m, par, 0, 0);
  double held = 0;
  for (const char* name : {"h.0.mlp.experts.fc.weight", "h.0.mlp.experts.fc.bias",
                           "h.0.mlp.experts.proj.weight", "h.0.mlp.experts.proj.bias"})
    held += double(L.find(name).numel());
  EXPECT_DOUBLE_EQ(held, double(m.num_experts) * moe_expert_params(m, 4));
  // The routing's tensors do not shrink with tp: tp 2 holds more than half
  // of tp 1's activations per layer, and sequence parallelism less.
  const double one = korthikanti_layer_bytes(m, 1, 1, false, Recompute::None, true, false);
  const double two = korthikanti_layer_bytes(m, 1, 2, false, Recompute::None, true, false);
  const double two_sp = korthikanti_layer_bytes(m, 1, 2, true, Recompute::None, true, false);
  EXPECT_GT(two, one / 2);
  EXPECT_LT(two_sp, two);
  EXPECT_GT(two_sp, 2 * h * double(m.seq_length) * moe_whole_activation_units(m) * 0.999);
  // The engine's own search now tries tp 2 for an MoE model.
  const SystemSpec sys = load_system("h100");
  SearchSpace sp;
  sp.devices = 16;
  sp.global_batch = 64;
  sp.pp = {4};
  sp.micro_batch = {1};
  sp.engine = true;
  std::set<int64_t> tps;
  for (const PlanLayout& P : enumerate_layouts(m, sys, sp)) tps.insert(P.par.tp);
  EXPECT_TRUE(tps.count(2)) << "no tp 2 layout";
}

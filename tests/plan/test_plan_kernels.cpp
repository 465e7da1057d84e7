// The planner's memory-bound kernels: bytes over bandwidth by default, a
// system file's measured [kernels] table (by Backend call, kernel_rates.h)
// when present, bad tables named; the [node] overlap and sync-wait terms;
// and calibrate's own measurement of the engine's kernels, call by call.
#include <gtest/gtest.h>

#include "temp_file.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "expect_error.h"
#include "tessera/core/error.h"
#include "tessera/kernels/cpu/attention.h"
#include "tessera/plan/calibrate.h"
#include "tessera/kernels/backend.h"
#include "tessera/kernels/cpu_backend_info.h"
#include "tessera/plan/kernel_rates.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/system.h"
#include "tiny_system_toml.h"

using namespace tessera;
using namespace tessera::plan;

namespace {

const std::string& kBase = kTinySystemToml;

GPTConfig small_model() {
  return GPTConfig{
      .num_layers = 2, .hidden_size = 128, .num_heads = 4, .seq_length = 64, .vocab_size = 512};
}

PlanLayout dp2() {
  PlanLayout L;
  L.par.dp = 2;
  L.par.micro_batch = 4;
  L.par.global_batch = 8;
  L.precision = Precision::Fp32;
  return L;
}

}  // namespace

TEST(KernelCost, BytesOverBandwidthWithoutATable) {
  SystemSpec s = load_system_file(write_temp("tessera_k0.toml", kBase));
  // A call's bytes at 10 GB/s: 8 MB in 0.8 ms.
  EXPECT_DOUBLE_EQ(s.kernel_seconds("layernorm_forward", 1e6, 8e6), 8e6 / 10e9);
  // AdamW moves what its cost says (backend.h): params, grads, m, v read
  // and written, 32 bytes a parameter in fp32.
  const kernels::KernelCall adamw = *kernels::Backend::adamw_update_cost(Precision::Fp32, 1000000).begin();
  EXPECT_DOUBLE_EQ(adamw.bytes_read + adamw.bytes_written, 32e6);
  EXPECT_DOUBLE_EQ(s.kernel_seconds(adamw.kernel, 1e6, 32e6), 32e6 / 10e9);
  EXPECT_DOUBLE_EQ(s.kernel_seconds("gelu_backward", 0, 0), 0.0);
  // The attention mask is drawn in registers: no traffic, no price unmeasured.
  EXPECT_EQ(kernel_rate(s.kernel_rates, kAttentionMaskDraw), 0.0);
}

TEST(KernelCost, MeasuredTableWinsAndMovesThePrediction) {
  SystemSpec plain = load_system_file(write_temp("tessera_k1.toml", kBase));
  SystemSpec measured = load_system_file(
      write_temp("tessera_k2.toml", kBase + "[kernels]\nlayernorm_forward = 2.5\nadamw_update = 10\n"
                                            "\"matmul_backward.dbias\" = 4\n"));
  EXPECT_DOUBLE_EQ(measured.kernel_seconds("layernorm_forward", 1e6, 8e6), 2.5e-3);
  EXPECT_DOUBLE_EQ(measured.kernel_seconds("adamw_update", 1e6, 32e6), 10e-3);
  // A part of a fused call, by its dotted name (quoted in TOML).
  EXPECT_DOUBLE_EQ(measured.kernel_seconds("matmul_backward.dbias", 1e6, 4e6), 4e-3);
  // Not in the table: the bandwidth model still.
  EXPECT_DOUBLE_EQ(measured.kernel_seconds("gelu_forward", 1e6, 8e6),
                   plain.kernel_seconds("gelu_forward", 1e6, 8e6));
  // The layout's LayerNorm time follows: 2 per layer forward x 2 layers + the
  // final one, over 4 x 64 rows x 128 features, one micro-batch per dp rank.
  const LayoutCost a = evaluate_layout(small_model(), plain, dp2());
  const LayoutCost b = evaluate_layout(small_model(), measured, dp2());
  const double elements = 4.0 * 64 * 128;
  // Unmeasured, a LayerNorm forward moves what the op list says it does
  // (model/op_list.cpp): the fp32 input and output (8 bytes per element),
  // and, which the hand-written list left out, its fp32 gain and shift read
  // (8 C bytes) and its mean and rstd written (8 bytes per row).
  const double rows = 4.0 * 64, C = 128;
  const double ln_forward_plain = 5 * (elements * 8 + rows * 8 + C * 8) / 10e9;
  const double ln_forward_measured = 5 * elements * 2.5e-9;
  EXPECT_NEAR(b.stages[0].ops[Op::LayerNorm] - a.stages[0].ops[Op::LayerNorm],
              ln_forward_measured - ln_forward_plain, 1e-12);
  EXPECT_GT(b.time.optimizer, a.time.optimizer);
}

// Dropout's masks are Philox draws, arithmetic that bytes over bandwidth
// undercounts ~10x on a CPU: a measured `dropout_rows` prices each hidden
// dropout element (dropout_rows) and a measured `attention_dropout` each
// draw of the flash kernel's probability mask (kernels/cpu/attention.h),
// forward and backward; unmeasured, the mask is free and the hidden
// dropout moves its 8 bytes.
TEST(KernelCost, MeasuredDropoutPricesTheMasks) {
  GPTConfig m = small_model();
  m.attention_dropout = m.hidden_dropout = 0.1f;
  const SystemSpec plain = load_system_file(write_temp("tessera_k9.toml", kBase));
  const SystemSpec measured = load_system_file(
      write_temp("tessera_k10.toml", kBase + "[kernels]\ndropout_rows = 3\nattention_dropout = 2\n"));
  const LayoutCost a = evaluate_layout(m, plain, dp2());
  const LayoutCost b = evaluate_layout(m, measured, dp2());
  // 2 layers x 4 sequences x 4 heads, each drawing its mask in forward and backward.
  const double draws = 2.0 * 4 * 4 *
                       double(cpu::attention_dropout_draws(64, true) +
                              cpu::attention_dropout_draws(64, false));
  EXPECT_NEAR(b.stages[0].ops[Op::Attention] - a.stages[0].ops[Op::Attention], draws * 2e-9, 1e-12);
  // Hidden dropout: the embedding's (forward, backward) and per layer two
  // sites forward and two backward, each over 4 x 64 rows x 128 features.
  const double elements = 10.0 * 4 * 64 * 128;
  EXPECT_NEAR(b.stages[0].ops[Op::Dropout] - a.stages[0].ops[Op::Dropout],
              elements * (3e-9 - 8 / 10e9), 1e-12);
}

TEST(KernelCost, BadTablesAreNamed) {
  const std::string unknown_kernel = kBase + "[kernels]\nlayer_norm = 1.0\n";
  EXPECT_TRUE(test::throws_error_with(
      [&] { load_system_file(write_temp("tessera_k3.toml", unknown_kernel)); },
      {"kernels.layer_norm", "Backend call"}))
      << "an unknown kernel";
  // The names of the old per-kind table are not calls: refused, not ignored.
  EXPECT_TRUE(test::throws_error_with(
      [&] { load_system_file(write_temp("tessera_k6.toml", kBase + "[kernels]\nresidual = 1\n")); },
      {"kernels.residual"}));
  EXPECT_THROW(load_system_file(write_temp("tessera_k4.toml", kBase + "[kernels]\nadamw_update = -1\n")),
               Error);
  std::string bad_overlap = kBase;
  bad_overlap.replace(bad_overlap.find("devices = 2"), 11, "devices = 2\ncomm_overlap = 1.5");
  EXPECT_TRUE(test::throws_error_with(
      [&] { load_system_file(write_temp("tessera_k5.toml", bad_overlap)); }, {"node.comm_overlap"}))
      << "comm_overlap 1.5";
}

TEST(KernelCost, OverlapAndSyncWaitEnterTheStep) {
  std::string text = kBase;
  SystemSpec hidden = load_system_file(write_temp("tessera_k6.toml", text));
  text.replace(text.find("devices = 2"), 11, "devices = 2\ncomm_overlap = 0.0\nsync_wait_us = 1000");
  SystemSpec exposed = load_system_file(write_temp("tessera_k7.toml", text));
  EXPECT_DOUBLE_EQ(hidden.comm_overlap, 1.0);
  EXPECT_DOUBLE_EQ(hidden.sync_wait, 0.0);
  // comm_overlap applies to an overlapped reduction (--overlap-grad-reduce) only.
  PlanLayout overlapped = dp2();
  overlapped.overlap_grad_reduce = true;
  const LayoutCost a = evaluate_layout(small_model(), hidden, overlapped);
  const LayoutCost b = evaluate_layout(small_model(), exposed, overlapped);
  EXPECT_DOUBLE_EQ(evaluate_layout(small_model(), hidden, dp2()).time.dp_exposed, b.time.dp_exposed);
  // ZeRO-0's all-reduce: hidden (up to the backward window) vs all exposed.
  EXPECT_GT(b.time.dp_exposed, a.time.dp_exposed);
  EXPECT_NEAR(b.time.dp_exposed, b.time.dp_reduce, 1e-15);
  EXPECT_DOUBLE_EQ(a.time.sync_wait, 0.0);
  // dp 2, ZeRO-0: the reduction's wait and the loss's all-reduce, 1 ms each.
  EXPECT_NEAR(b.time.sync_wait, 2e-3, 1e-15);
  EXPECT_NEAR(b.time.step - a.time.step,
              (b.time.dp_exposed - a.time.dp_exposed) + b.time.sync_wait, 1e-12);
  // tp 2 (2 layers, 2 micro-batches): 4 all-reduces per layer per
  // micro-batch, 3 at the head and 1 at the embedding per micro-batch, 1 for
  // the norm = 25.
  PlanLayout tp2 = dp2();
  tp2.par.dp = 1;
  tp2.par.tp = 2;
  EXPECT_NEAR(evaluate_layout(small_model(), exposed, tp2).time.sync_wait, 25e-3, 1e-15);
  // ... with sequence parallelism 11 per layer, 6 at the head and 2 at the
  // embedding per micro-batch: 44 + 16 + 1.
  tp2.par.sequence_parallel = true;
  EXPECT_NEAR(evaluate_layout(small_model(), exposed, tp2).time.sync_wait, 61e-3, 1e-15);
  // One device synchronises with nobody.
  PlanLayout one = dp2();
  one.par.dp = 1;
  one.par.global_batch = 4;
  EXPECT_DOUBLE_EQ(evaluate_layout(small_model(), exposed, one).time.sync_wait, 0.0);
}

TEST(InSitu, FactorsScaleTheirKindOfWorkOnly) {
  SystemSpec plain = load_system_file(write_temp("tessera_k9.toml", kBase));
  SystemSpec slow = load_system_file(
      write_temp("tessera_k10.toml", kBase + "[in_situ]\ngemm = 2.0\n\"grad-norm\" = 3.0\n"));
  EXPECT_DOUBLE_EQ(plain.in_situ[Op::Gemm], 1.0);
  EXPECT_DOUBLE_EQ(slow.in_situ[Op::Gemm], 2.0);
  const LayoutCost a = evaluate_layout(small_model(), plain, dp2());
  const LayoutCost b = evaluate_layout(small_model(), slow, dp2());
  EXPECT_NEAR(b.stages[0].ops[Op::Gemm], 2 * a.stages[0].ops[Op::Gemm], 1e-12);
  EXPECT_DOUBLE_EQ(b.stages[0].ops[Op::Attention], a.stages[0].ops[Op::Attention]);
  EXPECT_DOUBLE_EQ(b.stages[0].ops[Op::Comm], a.stages[0].ops[Op::Comm]);
  // Applied to the step's forward and backward kernels, not the optimizer's.
  EXPECT_DOUBLE_EQ(b.stages[0].ops[Op::GradNorm], a.stages[0].ops[Op::GradNorm]);
  EXPECT_THROW(load_system_file(write_temp("tessera_k11.toml", kBase + "[in_situ]\ncomm = 2.0\n")),
               Error);
  EXPECT_THROW(load_system_file(write_temp("tessera_k12.toml", kBase + "[in_situ]\ngemm = 0\n")),
               Error);
}

TEST(InSitu, FactorsAreMeasuredOverPredicted) {
  // A "measured" step exactly twice the tables' prediction for gemm and
  // equal for attention gives factors 2 and 1; kinds with nothing measured
  // stay 1.
  SystemSpec sys = load_system_file(write_temp("tessera_k13.toml", kBase));
  PlanLayout one;
  one.par.micro_batch = 2;
  one.par.global_batch = 2;
  one.precision = Precision::Fp32;
  Profile predicted = evaluate_layout(small_model(), sys, one).stages.front().ops;
  Profile measured;
  measured[Op::Gemm] = 2 * predicted[Op::Gemm];
  measured[Op::Attention] = predicted[Op::Attention];
  const Profile f = in_situ_factors(measured, sys, small_model(), 2);
  EXPECT_NEAR(f[Op::Gemm], 2.0, 1e-12);
  EXPECT_NEAR(f[Op::Attention], 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(f[Op::Loss], 1.0);
  // The engine's own step, timed: every kind of its work shows up.
  const Profile step = measure_training_step(small_model(), 2, 1);
  for (Op op : {Op::Gemm, Op::Attention, Op::LayerNorm, Op::Gelu, Op::Residual, Op::Embedding,
                Op::Loss})
    EXPECT_GT(step[op], 0.0) << op_name(op);
  // No communication on one rank: only the timed scopes around the tensor-
  // parallel hooks, which are identities here.
  EXPECT_LT(step[Op::Comm], 0.01 * step[Op::Gemm]);
  EXPECT_EQ(step[Op::Cast], 0.0);     // an fp32 step casts nothing
  EXPECT_EQ(step[Op::Dropout], 0.0);  // and this model has no dropout

  // A bf16 step of a model with dropout, as a --bf16 run's calibration
  // takes it: its casts and dropout are timed, and each factor is measured
  // over the same precision's prediction (which has them too).
  GPTConfig dropping = small_model();
  dropping.attention_dropout = dropping.hidden_dropout = 0.1f;
  const Profile bf16_step = measure_training_step(dropping, 2, 1, Precision::Bf16);
  EXPECT_GT(bf16_step[Op::Cast], 0.0);
  EXPECT_GT(bf16_step[Op::Dropout], 0.0);
  PlanLayout bf16 = one;
  bf16.precision = Precision::Bf16;
  bf16.engine = true;
  const Profile bf16_predicted = evaluate_layout(dropping, sys, bf16).stages.front().ops;
  ASSERT_GT(bf16_predicted[Op::Cast], 0.0);
  ASSERT_GT(bf16_predicted[Op::Dropout], 0.0);
  Profile bf16_measured = bf16_predicted;
  bf16_measured[Op::Cast] *= 3;
  bf16_measured[Op::Dropout] *= 0.5;
  const Profile g = in_situ_factors(bf16_measured, sys, dropping, 2, Precision::Bf16);
  EXPECT_NEAR(g[Op::Cast], 3.0, 1e-12);
  EXPECT_NEAR(g[Op::Dropout], 0.5, 1e-12);
  EXPECT_NEAR(g[Op::Gemm], 1.0, 1e-12);
}

// Calibration times every memory-bound call of a training step through the
// backend, at the model's own shapes: GPT-2's LayerNorm and GELU, the Llama
// family's RMSNorm and SwiGLU (GQA heads), each under its call's name, and
// what it wrote reads back as the planner's table.
TEST(KernelCost, CalibrateMeasuresTheEnginesKernelsCallByCall) {
  GPTConfig gpt2 = small_model();
  GPTConfig llama = gpt2;
  llama.normalization = Normalization::RMSNorm;
  llama.swiglu = true;
  llama.position_embedding = PositionEmbedding::Rope;
  llama.num_query_groups = 2;
  llama.add_bias_linear = false;
  // An MoE model's calibration (bench/planner_validation.sh MOE=1) writes the
  // routing's calls too, and the table must read back: `tessera calibrate`
  // once refused its own moe_combine.
  GPTConfig moe = gpt2;
  moe.num_experts = 4;
  moe.moe_router_topk = 2;
  moe.moe_shared_expert_intermediate_size = 32;
  moe.moe_shared_expert_gate = true;
  const auto& cpu = kernels::cpu_backend();
  for (const auto& [model, expected] :
       {std::pair{gpt2, std::vector<std::string>{"layernorm_forward", "layernorm_backward",
                                                 "gelu_forward", "gelu_backward", "add",
                                                 "bias_add", "matmul_forward.bias",
                                                 "matmul_backward.dbias", "dropout_rows",
                                                 "token_embedding_forward",
                                                 "position_embedding_forward",
                                                 "token_embedding_backward",
                                                 "cross_entropy_forward",
                                                 "cross_entropy_backward", "adamw_update",
                                                 "sum_squares"}},
        std::pair{llama, std::vector<std::string>{"rmsnorm_forward", "rmsnorm_backward",
                                                  "swiglu_forward", "swiglu_backward",
                                                  "dropout_rows", "adamw_update"}},
        std::pair{moe, std::vector<std::string>{"moe_route_forward", "moe_route_backward",
                                                "moe_permute", "moe_combine", "moe_shared_gate"}}}) {
    const KernelRates k = measure_kernel_rates(cpu, model, /*micro_batch=*/2, /*params=*/100000);
    for (const std::string& name : expected) EXPECT_GT(kernel_rate(k, name), 0.0) << name;
    for (const auto& [name, rate] : k) {
      EXPECT_TRUE(is_kernel_rate_key(name)) << name;
      // Per element, not per call: a few ns here (the routing's tens); under
      // 100 us even when a loaded machine preempts the one timed call (this
      // is a unit check, not a timing test).
      EXPECT_LT(rate, 1e-4) << name;
      // Only the calls the model makes: no LayerNorm in Llama, no RMSNorm in GPT-2.
      EXPECT_FALSE(model.rmsnorm() ? name.starts_with("layernorm") : name.starts_with("rmsnorm"))
          << name;
    }
  }
  EXPECT_GE(measure_attention_mask(cpu, 2, 64, AttentionHeads{4, 2, 32, 10000.0f}, 0.001), 0.0);

  Calibration c;
  c.cpu = "test";
  c.memory_bytes = 16e9, c.triad_bandwidth = 10e9, c.peak_gemm = 100e9;
  c.attention_efficiency = 0.3;
  c.gemm = {{256, 256, 256, 100e9}};
  c.kernels = measure_kernel_rates(cpu, moe, 2, 100000);
  c.kernels[std::string(kAttentionMaskDraw)] = 3e-10;
  c.kernel_rows = 128;
  SystemSpec s = load_system_file(write_temp("tessera_k8.toml", calibration_toml(c)));
  ASSERT_EQ(s.kernel_rates.size(), c.kernels.size());
  for (const auto& [name, rate] : c.kernels)
    EXPECT_NEAR(kernel_rate(s.kernel_rates, name), rate, 1e-4 * rate + 1e-15) << name;
}

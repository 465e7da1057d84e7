// bf16 and fp16 as distinct precisions of the planner (issue 13, part 2):
// each takes its own peak; Megatron-LM (a layout not marked `engine`) keeps
// a bf16 run's gradients in fp32 and reduces them in fp32, an fp16 run's in
// fp16, and pays for fp16's loss scaling each step; the engine differs only
// in its GEMMs, which a calibration measures per precision.
#include <gtest/gtest.h>

#include <string>

#include "tessera/plan/gemm_model.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/memory_model.h"
#include "tessera/plan/system.h"

using namespace tessera;
using namespace tessera::plan;

namespace {

// A system whose fp16 peak is twice its bf16 one (no shipped device has
// that; it shows each precision takes its own).
const std::string kTwoPeaks = R"(
name = "two-peaks"
[device]
memory_GB = 80.0
memory_bandwidth_GBps = 2000.0  # source: test
memory_efficiency = 1.0
compute_units = 108
peak_TFLOPs = { fp16 = 200.0, bf16 = 100.0, fp32 = 20.0 }
[node]
devices = 8
[[network]]
ranks = 8
bandwidth_GBps = 300.0
latency_us = 3.0
[[network]]
ranks = 0
bandwidth_GBps = 25.0
latency_us = 10.0
)";

GPTConfig gpt_1b() {
  return GPTConfig{.num_layers = 24, .hidden_size = 2048, .num_heads = 16, .seq_length = 2048,
                   .vocab_size = 50257};
}

// Megatron's data-parallel layout with the distributed optimizer.
PlanLayout dp8(Precision p) {
  PlanLayout L;
  L.par.dp = 8;
  L.par.micro_batch = 1;
  L.par.global_batch = 64;
  L.par.zero_stage = 1;
  L.par.recompute = Recompute::Full;
  L.precision = p;
  return L;
}

SystemSpec a100() {
  return load_system(std::string(TESSERA_SOURCE_DIR) + "/configs/systems/dgx-a100-80gb.toml");
}

}  // namespace

TEST(PlanPrecision, EachSixteenBitPrecisionTakesItsOwnPeak) {
  const SystemSpec s = load_system_text(kTwoPeaks, "two-peaks");
  const GemmShape big{8192, 8192, 8192};  // compute bound, whole waves
  EXPECT_NEAR(gemm_seconds(s, Precision::Fp16, big) / gemm_seconds(s, Precision::Bf16, big), 0.5,
              1e-9);
  const LayoutCost fp16 = evaluate_layout(gpt_1b(), s, dp8(Precision::Fp16));
  const LayoutCost bf16 = evaluate_layout(gpt_1b(), s, dp8(Precision::Bf16));
  EXPECT_LT(fp16.time.compute, 0.6 * bf16.time.compute);
  // MFU against the precision's own peak: fp16 is faster but its peak twice.
  EXPECT_NEAR(fp16.mfu, fp16.model_flops / (fp16.time.step * 8 * 200e12), 1e-12);
  EXPECT_NEAR(bf16.mfu, bf16.model_flops / (bf16.time.step * 8 * 100e12), 1e-12);
}

TEST(PlanPrecision, MegatronBf16KeepsAndReducesFp32Gradients) {
  const SystemSpec s = a100();
  EXPECT_EQ(state_bytes_per_param(Precision::Bf16).grads, 4.0);
  EXPECT_EQ(state_bytes_per_param(Precision::Fp16).grads, 2.0);
  const LayoutCost fp16 = evaluate_layout(gpt_1b(), s, dp8(Precision::Fp16));
  const LayoutCost bf16 = evaluate_layout(gpt_1b(), s, dp8(Precision::Bf16));
  // ZeRO-1 shards the optimizer state, not the gradients: 2 vs 4 bytes each.
  const double params = double(fp16.stages[0].params);
  EXPECT_NEAR(fp16.stages[0].state.grads, 2.0 * params, 1.0);
  EXPECT_NEAR(bf16.stages[0].state.grads, 4.0 * params, 1.0);
  EXPECT_NEAR(bf16.peak_memory - fp16.peak_memory, 2.0 * params, 1.0);
  // The reduce-scatter moves twice the bytes, the weight all-gather the same
  // 2 bytes: bandwidth bound at 1.3B weights, (4 + 2) / (2 + 2) = 1.5x.
  EXPECT_GT(bf16.time.dp_reduce, 1.45 * fp16.time.dp_reduce);
  EXPECT_LT(bf16.time.dp_reduce, 1.5 * fp16.time.dp_reduce);
}

TEST(PlanPrecision, MegatronFp16PaysForLossScaling) {
  const SystemSpec s = a100();
  // One device: no dp shard and no model-parallel group for the found-inf
  // flag, so the difference is exactly the two passes over the gradients.
  PlanLayout one = dp8(Precision::Fp16);
  one.par.dp = 1;
  one.par.global_batch = 8;
  PlanLayout one_bf16 = one;
  one_bf16.precision = Precision::Bf16;
  const LayoutCost fp16 = evaluate_layout(gpt_1b(), s, one);
  const LayoutCost bf16 = evaluate_layout(gpt_1b(), s, one_bf16);
  const double params = double(fp16.stages[0].params);
  EXPECT_NEAR(fp16.time.optimizer - bf16.time.optimizer,
              14.0 * params / s.achieved_memory_bandwidth(), 1e-9);
  // With a model-parallel group (tp 8) the flag's all-reduce adds latency only.
  PlanLayout tp8 = one;
  tp8.par.tp = 8;
  PlanLayout tp8_bf16 = tp8;
  tp8_bf16.precision = Precision::Bf16;
  const LayoutCost a = evaluate_layout(gpt_1b(), s, tp8), b = evaluate_layout(gpt_1b(), s, tp8_bf16);
  const double passes = 14.0 * double(a.stages[0].params) / s.achieved_memory_bandwidth();
  EXPECT_GT(a.time.optimizer - b.time.optimizer, passes);
  EXPECT_LT(a.time.optimizer - b.time.optimizer, passes + 100e-6);
}

TEST(PlanPrecision, EngineBf16AndFp16DifferOnlyInTheirGemms) {
  // The engine keeps fp32 gradients in both and folds fp16's unscale into
  // its gradient norm: equal peaks and no tables give equal plans.
  SystemSpec s = a100();
  PlanLayout fp16 = dp8(Precision::Fp16), bf16 = dp8(Precision::Bf16);
  fp16.engine = bf16.engine = true;
  const LayoutCost f = evaluate_layout(gpt_1b(), s, fp16), b = evaluate_layout(gpt_1b(), s, bf16);
  EXPECT_DOUBLE_EQ(f.time.step, b.time.step);
  EXPECT_DOUBLE_EQ(f.peak_memory, b.peak_memory);
  // A CPU whose fp16 GEMMs widen to fp32: its measured fp16 table, slower.
  s.gemm_measured_bf16 = {{2048, 2048, 2048, 200e12}};
  s.gemm_measured_fp16 = {{2048, 2048, 2048, 100e12}};
  const LayoutCost f2 = evaluate_layout(gpt_1b(), s, fp16), b2 = evaluate_layout(gpt_1b(), s, bf16);
  // Op::Gemm also holds the bias kernels (memory bound, equal in both): the
  // matmuls alone take twice as long, so the bucket a little under 2x.
  EXPECT_GT(f2.stages[0].ops[Op::Gemm], 1.95 * b2.stages[0].ops[Op::Gemm]);
  EXPECT_LT(f2.stages[0].ops[Op::Gemm], 2.0 * b2.stages[0].ops[Op::Gemm]);
  // Give bf16 the fp16 table: the two price every GEMM the same again.
  s.gemm_measured_bf16 = s.gemm_measured_fp16;
  const LayoutCost b3 = evaluate_layout(gpt_1b(), s, bf16);
  EXPECT_DOUBLE_EQ(f2.stages[0].ops[Op::Gemm], b3.stages[0].ops[Op::Gemm]);
  EXPECT_DOUBLE_EQ(f2.stages[0].ops[Op::LayerNorm], b2.stages[0].ops[Op::LayerNorm]);
  EXPECT_DOUBLE_EQ(f2.time.optimizer, b2.time.optimizer);
}

TEST(PlanPrecision, MegatronSixteenBitResidualHalvesTheFp32Kernels) {
  // The same op list priced for Megatron (16-bit residual stream, no casts)
  // and for the engine (fp32 residual stream, casts around the GEMMs).
  const SystemSpec s = a100();
  for (Precision p : {Precision::Bf16, Precision::Fp16}) {
    PlanLayout megatron = dp8(p), engine = dp8(p);
    engine.engine = true;
    const Profile mg = evaluate_layout(gpt_1b(), s, megatron).stages[0].ops;
    const Profile en = evaluate_layout(gpt_1b(), s, engine).stages[0].ops;
    // Residual adds and biases are fp32 alone in the list: exactly half.
    EXPECT_NEAR(mg[Op::Residual], 0.5 * en[Op::Residual], 1e-12) << precision_name(p);
    // LayerNorm's backward is fp32 alone (halved), its forward writes a
    // 16-bit output already (kept).
    EXPECT_GT(mg[Op::LayerNorm], 0.5 * en[Op::LayerNorm]) << precision_name(p);
    EXPECT_LT(mg[Op::LayerNorm], 0.8 * en[Op::LayerNorm]) << precision_name(p);
    EXPECT_GT(en[Op::Cast], 0.0) << precision_name(p);
    EXPECT_EQ(mg[Op::Cast], 0.0) << precision_name(p);
    EXPECT_DOUBLE_EQ(mg[Op::Loss], en[Op::Loss]) << precision_name(p);
    EXPECT_DOUBLE_EQ(mg[Op::Gelu], en[Op::Gelu]) << precision_name(p);  // its 16-bit view already
  }
  // fp32 has nothing to halve.
  PlanLayout megatron = dp8(Precision::Fp32), engine = dp8(Precision::Fp32);
  engine.engine = true;
  EXPECT_DOUBLE_EQ(evaluate_layout(gpt_1b(), s, megatron).stages[0].ops[Op::LayerNorm],
                   evaluate_layout(gpt_1b(), s, engine).stages[0].ops[Op::LayerNorm]);
}

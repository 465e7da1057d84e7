// torchtitan's op-level selective recompute keeps its saved ops' outputs
// (plan/op_sac.h op_sac_layer_bytes) instead of Megatron's selective set.
#include <gtest/gtest.h>

#include "tessera/plan/layout_cost.h"
#include "tessera/plan/memory_model.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/op_sac.h"

using namespace tessera;
using namespace tessera::plan;

TEST(OpSacMemory, KeepsTheInputAndTheSavedOpsOutputs) {
  const GPTConfig m = find_preset("llama-3-8b")->config;
  const double sbh = 8192.0 * 2 * 4096;
  // tp 1: input, wq, wv (8 of 32 heads), SDPA, w1 (14336), w2: 15.5 h of 2
  // bytes a token, and SDPA's fp32 log-sum-exp per query head.
  EXPECT_NEAR(op_sac_layer_bytes(m, 2, 1, false), 15.5 * sbh + 4.0 * 32 * 8192 * 2, 1.0);
  // Below Megatron's selective set for the same layer (34 sbh).
  EXPECT_NEAR(korthikanti_layer_bytes(m, 2, 1, false, Recompute::Selective, true, false), 34 * sbh, 1.0);
  // tp 8 with SP: the input and the reduce-scatters' outputs shard too; w2's
  // partial sum stays full width.
  EXPECT_NEAR(op_sac_layer_bytes(m, 2, 8, true),
              sbh * 2 * ((4096.0 + 4096 + 1024 + 14336 + 4096 + 2 * 4096) / 8 + 4096) / 4096 +
                  4.0 * 32 / 8 * 8192 * 2,
              1.0);
}

TEST(OpSacMemory, APlanWithOpSacHoldsThoseBytesPerLayer) {
  const GPTConfig m = find_preset("llama-3-8b")->config;
  PlanLayout L;
  L.par.dp = 8;
  L.par.micro_batch = 2;
  L.par.global_batch = 16;
  L.par.zero_stage = 3;
  L.par.recompute = Recompute::Selective;
  L.precision = Precision::Bf16;
  PlanLayout sac = L;
  sac.torchtitan_op_sac = true;
  const StageActivations a = stage_activations(m, L, 0), b = stage_activations(m, sac, 0);
  EXPECT_NEAR(b.layers, 32 * op_sac_layer_bytes(m, 2, 1, false), 1.0);
  // The layer recomputed in backward and the ends are the same in both.
  EXPECT_NEAR(a.total - a.layers, b.total - b.layers, 1.0);
  EXPECT_LT(b.total, a.total);
}

// What a mixture-of-experts model (docs/moe.md) changes in a plan beyond
// what the engine's op list already prices (the router GEMM, the experts'
// grouped GEMMs over the routed rows, capacity padding in their row count,
// the permute and combine passes) and its parameter count already holds
// (all E experts per layer): the stored activations of an MoE layer in
// Korthikanti's form, expert parallelism's memory and all-to-all, and the
// load imbalance a run measured. A dense model (num_experts 0) changes
// nothing.
#pragma once
#include <cstdint>
#include <string>

#include "tessera/config/gpt_config.h"
#include "tessera/model/op_list.h"
#include "tessera/parallel/memory_bytes.h"
#include "tessera/plan/layout.h"
#include "tessera/plan/param_counter.h"
#include "tessera/plan/system.h"

namespace tessera::plan {

// Rows each expert GEMM runs over per token, as a multiple of the top-k:
// 1 dropless; under --moe-expert-capacity-factor f the experts run E x
// capacity rows, f x the routed ones (padding when f > 1, drops when < 1).
double moe_row_factor(const GPTConfig& m, int64_t tokens);

// Korthikanti's MLP term (16-bit words of h per token, split over tp) of an
// average layer: a dense layer's fc output and activation output, 2 (fc +
// F) / h; an MoE layer's the same for each of its K routed rows (times the
// row factor), plus the permuted input rows and the experts' outputs the
// combine's backward reads (2 K each) and the router's fp32 logits and
// probabilities (8 E / h). Averaged over the layers by --moe-layer-freq.
double moe_mlp_activation_units(const GPTConfig& m, double dense_units, int64_t tokens);
// The part of those units every tensor-parallel rank holds whole, for all
// the micro-batch's rows with or without SP (the engine routes the full
// token set on each tp rank): the permuted input rows, the experts' output
// rows, the router's logits and probabilities, and the shared gate's fp32
// output; averaged over the layers as above. 0 for a dense model.
double moe_whole_activation_units(const GPTConfig& m);

// The expert-parallel all-to-all of one MoE layer for one micro-batch on one
// rank: dispatch and combine in forward, both again in backward (each the
// routed rows' hidden vectors, (ep - 1) / ep of them leaving the rank), on
// the tier an ep group of ranks `stride` apart spans. Not overlapped
// (Megatron's alltoall dispatcher waits for it). 0 for ep 1.
struct MoeAllToAll {
  double forward = 0, backward = 0;
};
MoeAllToAll moe_all_to_all(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L,
                           int64_t ep, int64_t stride);

// The slowest rank's share of the expert GEMMs over the mean under expert
// parallelism: a run's measured imbalance (max / mean tokens per expert),
// at most ep x (one rank holds all the traffic); 1 without expert
// parallelism (one rank runs every expert) or without a measurement.
double moe_imbalance_factor(double measured_imbalance, int64_t ep);

// The expert-parallel size a layout is priced at (ParallelConfig::ep,
// --expert-model-parallel-size): every term below takes it from here.
int64_t moe_ep(const PlanLayout& L);

// One expert's parameters (fc, or gate and up, and proj, with biases) on
// one of `tp` tensor-parallel ranks, as the engine's ParamLayout holds
// them: fc and proj split over tp (experts under TP), the proj bias whole.
double moe_expert_params(const GPTConfig& m, int64_t tp = 1);
// The experts' parameters pipeline rank `stage` holds with every expert
// (its MoE layers x E x moe_expert_params).
double moe_stage_expert_params(const GPTConfig& m, const ParallelConfig& par, int64_t stage);

// A stage's model state with expert parallelism, as the engine holds it
// (ParamLayout's units, DataParallel's ZeRO): the dense units ZeRO-sharded
// over dp x cp, the rank's expert units (its E / ep experts of each MoE
// layer, ParamCounter::stage_expert_numel) over the dp x cp / ep ranks
// that hold the same experts; padding included, so the bytes are the
// engine's exactly.
MemoryBytes moe_stage_state(ParamCounter& params, const ParallelConfig& par, int64_t stage,
                            const StateBytesPerParam& per, int64_t ep);

// The seconds one layer's expert GEMMs (the op list's grouped_matmul
// entries, priced as layer_ops prices them) add for one micro-batch when the
// slowest rank's experts get `factor` x the mean rows (moe_imbalance_factor):
// (factor - 1) x their time, per phase.
struct MoePhaseSeconds {
  double forward = 0, backward = 0, recompute = 0;
};
MoePhaseSeconds moe_imbalance_seconds(const OpList& ol, const SystemSpec& sys,
                                      const PlanLayout& L, double factor);

}  // namespace tessera::plan

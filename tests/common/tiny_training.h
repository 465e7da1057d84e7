// The tiny training run the multi-rank tests compare every layout with: the
// trainer's settings for the tiny model, its random-token data, and the
// single-process run every layout must reproduce (each rank computes it).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/core/rng.h"
#include "tessera/model/block.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/memory_model.h"
#include "tessera/train/sampled_batches.h"
#include "tessera/train/trainer.h"
#include "rel.h"
#include "tiny_model.h"

namespace tessera::test {

// dropout: the attention and hidden dropout probability (0: none, the
// reference path; the layout tests run both). precision: the GEMMs' (--bf16,
// --fp16; fp32 the reference). llama: the Llama family's tiny model
// (tiny_llama: RMSNorm, SwiGLU, RoPE, GQA 4 over 2, untied, no biases)
// instead of GPT's.
inline TrainConfig tiny_train_config(int zero_stage, int64_t dp, int64_t layers = 2,
                                     float dropout = 0.0f,
                                     Precision precision = Precision::Fp32, bool llama = false) {
  TrainConfig c;
  c.bf16 = precision == Precision::Bf16;
  c.fp16 = precision == Precision::Fp16;
  c.model = llama ? tiny_llama(layers) : tiny_gpt(layers);
  c.model.attention_dropout = dropout;
  c.model.hidden_dropout = dropout;
  c.par.dp = dp;
  c.par.micro_batch = 2;
  c.par.global_batch = 8;  // dp 2: 2 accumulation steps; dp 4: 1
  c.par.zero_stage = zero_stage;
  c.train_iters = 20;
  c.optim.lr = 5e-3f;
  c.optim.min_lr = 5e-4f;
  c.optim.warmup_iters = 3;
  c.optim.clip_grad = 0.5f;  // clipping engaged: the global norm must be right
  c.peak_tflops = 1;
  c.valid_fraction = 0.1;
  c.eval_iters = 3;
  c.progress = false;
  c.validate(dp);
  return c;
}

// tokens: the corpus' length (longer sequences need more for both splits).
inline std::unique_ptr<SampledBatches> tiny_train_data(const TrainConfig& c,
                                                       size_t n_tokens = 4096) {
  std::vector<int32_t> tokens(n_tokens);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = int32_t(rng_u64(42, 0, i) % uint64_t(c.model.vocab_size));
  return std::make_unique<SampledBatches>(memory_token_source(tokens, "random"),
                                          c.model.vocab_size, c.model.seq_length, c.seed,
                                          c.valid_fraction);
}

inline std::vector<StepStats> single_process_run(int64_t steps, int64_t layers = 2,
                                                 float dropout = 0.0f,
                                                 Precision precision = Precision::Fp32,
                                                 bool llama = false) {
  TrainConfig c = tiny_train_config(0, 1, layers, dropout, precision, llama);
  auto data = tiny_train_data(c);
  Trainer t(c, *data);
  std::vector<StepStats> out;
  for (int64_t s = 1; s <= steps; ++s) out.push_back(t.train_step(s));
  return out;
}

// Step s of a parallel run against the same step of the reference. The first
// step differs only by the order of reductions; later steps add the drift of
// the updates, and the gradient norm (a sum of squares) drifts the most.
inline void expect_step_matches(const StepStats& got, const StepStats& ref, int64_t s,
                                const std::string& what) {
  EXPECT_LE(rel(got.loss, ref.loss), s == 1 ? 1e-5 : 1e-4)
      << what << " step " << s << ": " << got.loss << " vs " << ref.loss;
  EXPECT_LE(rel(got.grad_norm, ref.grad_norm), s == 1 ? 1e-5 : 1e-3)
      << what << " step " << s << ": " << got.grad_norm << " vs " << ref.grad_norm;
}

// The same under --bf16 / --fp16: a different reduction order can move a
// value across a 16-bit rounding boundary, so layouts agree to 2e-3
// relative loss (issue 12), not 1e-4.
// Returns the relative loss difference (for the tests' reports of how close).
inline double expect_lowp_step_matches(const StepStats& got, const StepStats& ref, int64_t s,
                                       const std::string& what) {
  const double r = rel(got.loss, ref.loss);
  EXPECT_LE(r, 2e-3) << what << " step " << s << ": " << got.loss << " vs " << ref.loss;
  EXPECT_EQ(got.precision, ref.precision) << what;
  return r;
}

// Bytes of one step's `op` ("all_gather", "reduce_scatter", ...) on the
// groups named `group` ("dp", ...), from StepStats::comm_bytes.
inline double step_comm_bytes(const StepStats& s, const std::string& group,
                              const std::string& op) {
  double b = 0;
  for (const auto& [key, bytes] : s.comm_bytes)
    if (key == group + "/" + op) b += double(bytes);
  return b;
}

// The planner's activation bytes for a rank's pipeline stage (the engine's
// arena in the run's precision: plan::PlanLayout::engine) against what its
// trainer allocated, exactly. The planner models tp rank 0 (the largest
// vocabulary slice), so other tp ranks are not compared.
inline void expect_activations_predicted(const Trainer& t, const TrainConfig& c, int tp_rank,
                                         int pp_rank) {
  if (tp_rank != 0) return;
  plan::PlanLayout L;
  L.par = c.par;
  L.precision = c.precision();
  L.engine = true;
  if (c.par.uneven_stages()) {
    // Uneven stages: the engine's arena for this stage's chunk (its own layer
    // count, ParallelConfig::chunk_layer_count) times the schedule's peak.
    // (plan::stage_activations prices the even split only, for now.)
    const auto& p = c.par;
    const ActShape shape = plan::engine_shape(
        c.model, p.micro_batch, p.tp, p.chunk_layer_count(c.model.num_layers, pp_rank),
        pp_rank == chunk_rank(p.pp, p.pp * p.virtual_stages - 1, p.placement()),  // the head's
        p.sequence_parallel, p.recompute, L.precision);
    const int64_t in_flight = plan::in_flight_chunks(p.schedule, p.pp, p.virtual_stages,
                                                     p.accumulation_steps(), pp_rank);
    // A split backward's slots also keep each layer's GEMM output gradients (model/block.h).
    const bool split =
        p.schedule == ScheduleKind::ZeroBubbleH1 || p.schedule == ScheduleKind::ZeroBubbleV;
    const int64_t stash = split ? shape.L * layer_grad_stash_bytes(shape) : 0;
    EXPECT_EQ(double(in_flight) * double(activations_bytes(shape) + stash),
              double(t.activation_bytes()))
        << precision_name(c.precision()) << " pp rank " << pp_rank;
    return;
  }
  const plan::StageActivations a = plan::stage_activations(c.model, L, pp_rank);
  EXPECT_EQ(a.total, double(t.activation_bytes()))
      << precision_name(c.precision()) << " pp rank " << pp_rank;
}

}  // namespace tessera::test

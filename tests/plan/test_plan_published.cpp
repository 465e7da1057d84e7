// Planner v3 (issue 33): the published-runs suite's reader and its
// conversions of a source's figure into a step, ZeRO-3 as FSDP runs it on
// GPUs (memory with two units in flight, gathers overlapped with compute),
// and FP8 plans.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "expect_error.h"
#include "temp_file.h"
#include "tessera/model/param_layout.h"
#include "tessera/plan/comm_model.h"
#include "tessera/plan/eager_kernels.h"
#include "tessera/plan/gemm_model.h"
#include "tessera/plan/layer_ops.h"
#include "tessera/plan/op_sac.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/memory_model.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/published.h"
#include "tessera/plan/system.h"

using namespace tessera;
using namespace tessera::plan;
using tessera::test::throws_error_with;

namespace {

// One run of GPT-3 6.7B on 8 A100s, its figure given `measure` (a line).
std::string one_run(const std::string& measure, const std::string& extra = "") {
  return R"([source]
key = "test"
citation = "made up for a test"
flops = "megatron-2021"
[[run]]
name = "gpt 6.7b"
system = "dgx-a100-80gb"
model = "gpt3-6.7b"
devices = 8
tensor-model-parallel-size = 2
micro-batch-size = 2
global-batch-size = 64
recompute = "full"
precision = "fp16"
)" + extra + measure + "\n";
}

// FSDP (ZeRO-3) over one 8-GPU node, one micro-batch a step: the layout the
// issue's FSDP tests plan.
PlanLayout fsdp_node(int64_t micro_batch) {
  PlanLayout L;
  L.par.dp = 8;
  L.par.micro_batch = micro_batch;
  L.par.global_batch = 8 * micro_batch;
  L.par.zero_stage = 3;
  L.precision = Precision::Bf16;
  return L;
}

TEST(PublishedRuns, EachFigureBecomesTheStepItImplies) {
  const GPTConfig m = find_preset("gpt3-6.7b")->config;
  const double tokens = 64.0 * 2048;
  auto step_of = [](const std::string& measure) {
    return load_published(write_temp("published_" + std::to_string(std::hash<std::string>{}(measure)) +
                                         ".toml",
                                     one_run(measure)))
        .front()
        .published_step;
  };
  EXPECT_DOUBLE_EQ(step_of("step-seconds = 12.5"), 12.5);
  EXPECT_DOUBLE_EQ(step_of("tokens-per-second = 65536"), tokens / 65536);
  EXPECT_DOUBLE_EQ(step_of("tokens-per-second-per-device = 4096"), tokens / (8 * 4096.0));
  // Narayanan et al.'s eq. 3 by hand: 96 B s l h^2 (1 + s/6h + V/16lh).
  const double s = 2048, l = 32, h = 4096, V = double(m.vocab_size);
  const double eq3 = 96 * 64 * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  EXPECT_NEAR(step_of("tflops-per-device = 150.0"), eq3 / (8 * 150e12), 1e-9);
  // MFU of a stated peak, in a convention of the run's own (6 N T).
  const double N = double(ParamLayout::count_model_params(m));
  EXPECT_NEAR(step_of("mfu = 0.5\npeak-tflops = 312.0\nflops = \"6nd\""),
              6 * N * tokens / (8 * 0.5 * 312e12), 1e-9);
  EXPECT_NEAR(convention_flops(FlopConvention::SixNDAttn, m, 64),
              6 * N * tokens + 12 * l * h * s * tokens, 1e3);
}

TEST(PublishedRuns, ReadsTheLayoutAndItsKind) {
  const auto runs = load_published(write_temp(
      "published_layout.toml",
      one_run("step-seconds = 1.0", "zero-stage = 3\nsequence-parallel = true\ninferred = "
                                    "[\"micro-batch-size\"]\nmemory-gb = 40.5\n")));
  ASSERT_EQ(runs.size(), 1u);
  const PublishedRun& r = runs.front();
  EXPECT_EQ(r.layout.par.tp, 2);
  EXPECT_EQ(r.layout.par.dp, 4);
  EXPECT_EQ(r.layout.par.zero_stage, 3);
  EXPECT_EQ(r.layout.par.recompute, Recompute::Full);
  EXPECT_EQ(r.layout.precision, Precision::Fp16);
  EXPECT_TRUE(r.layout.par.sequence_parallel);
  EXPECT_EQ(r.inferred, std::vector<std::string>{"micro-batch-size"});
  EXPECT_DOUBLE_EQ(r.memory_gb, 40.5);
  EXPECT_EQ(r.kind(), "fsdp");
  EXPECT_EQ(r.source, "test");
}

TEST(PublishedRuns, BadRowsNameTheFileTheRunAndTheKey) {
  EXPECT_TRUE(throws_error_with([] { load_published(write_temp("published_two.toml",
                                             one_run("step-seconds = 1.0\ntokens-per-second = 5"))); }, {"run 'gpt 6.7b': give exactly one measured figure"}));
  EXPECT_TRUE(throws_error_with([] { load_published(write_temp("published_typo.toml",
                                             one_run("step-seconds = 1.0", "zero_stage = 1\n"))); }, {"run 'gpt 6.7b': unknown key 'zero_stage'"}));
  EXPECT_TRUE(throws_error_with([] { load_published(write_temp("published_mfu.toml", one_run("mfu = 0.4"))); }, {"'mfu' needs 'peak-tflops'"}));
  EXPECT_TRUE(throws_error_with([] { load_published(write_temp("published_conv.toml",
                                             one_run("tflops-per-device = 100.0\nflops = \"7nd\""))); }, {"flops = \"7nd\" is none of"}));
  EXPECT_TRUE(throws_error_with([] { load_published(write_temp("published_div.toml",
                                             one_run("step-seconds = 1.0", "pipeline-model-parallel-size = 3\n"))); }, {"devices 8 is not a multiple of tp x pp = 6"}));
}

TEST(PublishedRuns, SummariesAreTheErrorsMeanAbsoluteMaxAndSigned) {
  const ErrorSummary s = summarize({-0.2, 0.1, 0.05});
  EXPECT_EQ(s.n, 3u);
  EXPECT_NEAR(s.mape, 0.35 / 3, 1e-12);
  EXPECT_NEAR(s.max_abs, 0.2, 1e-12);
  EXPECT_NEAR(s.mean_signed, -0.05 / 3, 1e-12);
}

TEST(PublishedRuns, TheTermsSumToTheStep) {
  const auto runs = load_published(write_temp("published_terms.toml", one_run("step-seconds = 20.0")));
  const PublishedValidation v = validate_published(runs);
  ASSERT_EQ(v.rows.size(), 1u);
  const StepTerms& t = v.rows[0].terms;
  const double sum = t.gemm + t.attention + t.memory_bound + t.tp_comm + t.pp_bubble +
                     t.dp_exposed + t.optimizer + t.other;
  EXPECT_NEAR(sum, v.rows[0].cost.time.step, 1e-9);
  EXPECT_GT(t.gemm, 0.5 * sum);
  EXPECT_GT(t.tp_comm, 0);
  EXPECT_NEAR(v.rows[0].error, v.rows[0].cost.time.step / 20.0 - 1, 1e-12);
}

// A row whose figures contradict each other is planned and shown, marked,
// but its step error enters no summary and no prediction interval.
TEST(PublishedRuns, AnExcludedRowIsShownButCountedNowhere) {
  std::string two = one_run("step-seconds = 20.0");
  std::string second = one_run("step-seconds = 2.0", "excluded = \"the step and batch contradict\"\n");
  second = second.substr(second.find("[[run]]"));
  const size_t at = second.find("gpt 6.7b");
  second.replace(at, 8, "gpt 6.7b, too fast");
  const PublishedValidation v =
      validate_published(load_published(write_temp("published_excluded.toml", two + second)));
  ASSERT_EQ(v.rows.size(), 2u);
  EXPECT_EQ(v.rows[1].run.excluded, "the step and batch contradict");
  EXPECT_GT(v.rows[1].error, 1.0);  // planned: ten times slower than its figure
  EXPECT_EQ(v.all.n, 1u);
  EXPECT_NEAR(v.all.mape, std::abs(v.rows[0].error), 1e-12);
  EXPECT_EQ(v.by_source.at("test").n, 1u);
  EXPECT_EQ(v.by_kind.at(v.rows[0].run.kind()).n, 1u);
  const PredictionInterval p = prediction_interval(v, v.rows[0].run.kind());
  EXPECT_EQ(p.runs, 1u);
  EXPECT_NEAR(p.low, 1 / (1 + v.rows[0].error), 1e-12);
  const std::string text = format_published(v);
  EXPECT_NE(text.find("2 published runs (1 excluded: x)"), std::string::npos) << text;
  EXPECT_NE(text.find("test: gpt 6.7b, too fast: the step and batch contradict"), std::string::npos)
      << text;
  EXPECT_TRUE(throws_error_with([] { load_published(write_temp("published_excl_empty.toml",
                                             one_run("step-seconds = 1.0", "excluded = \"\"\n"))); }, {"excluded needs its reason"}));
}

// llm-foundry's MPT trains without dropout: a GPT row saying `dropout =
// false` stores no masks (Korthikanti's 2 of the replicated 10 a layer, and
// the embedding's sbh on the first stage); the Llama family follows its
// config either way.
TEST(PublishedRuns, AGptWithoutDropoutStoresNoMasks) {
  const GPTConfig gpt = find_preset("gpt3-6.7b")->config;
  const double sbh = 2048.0 * 4096;
  EXPECT_DOUBLE_EQ(korthikanti_layer_bytes(gpt, 1, 1, false, Recompute::None, true), 34 * sbh);
  EXPECT_DOUBLE_EQ(korthikanti_layer_bytes(gpt, 1, 1, false, Recompute::None, true, false, true),
                   32 * sbh);
  EXPECT_DOUBLE_EQ(korthikanti_layer_bytes(gpt, 1, 8, true, Recompute::None, true, false, true),
                   sbh / 8 * 32);
  EXPECT_TRUE(stores_dropout_masks(gpt, false));
  EXPECT_FALSE(stores_dropout_masks(gpt, true));
  GPTConfig dropping = gpt;
  dropping.hidden_dropout = 0.1f;
  EXPECT_TRUE(stores_dropout_masks(dropping, true));  // its own config says so
  const auto with = load_published(write_temp("published_dropout_on.toml", one_run("step-seconds = 20.0")));
  const auto without = load_published(
      write_temp("published_dropout_off.toml", one_run("step-seconds = 20.0", "dropout = false\n")));
  EXPECT_FALSE(with.front().layout.gpt_without_dropout);
  ASSERT_TRUE(without.front().layout.gpt_without_dropout);
  const PublishedValidation a = validate_published(with), b = validate_published(without);
  // tp 2, micro-batch 2, no SP, full recompute: the layer keeps its input
  // alone, so the masks go from the one recomputed layer (2 sbh / ... of
  // its replicated part) and the embedding's mask of each in-flight
  // micro-batch (one, pp 1).
  const double sbh2 = 2048.0 * 2 * 4096;
  EXPECT_NEAR(a.rows[0].cost.stages[0].activations - b.rows[0].cost.stages[0].activations,
              2 * sbh2 + sbh2, 1.0);
  EXPECT_TRUE(throws_error_with([] { load_published(write_temp("published_dropout_bad.toml",
                                             one_run("step-seconds = 1.0", "dropout = 0.1\n"))); }, {"'dropout' must be true or false"}));
}

// Issue 33: a 6.7B GPT on 8 A100-80GB at micro-batch 6 without recompute
// ran under FSDP; it was planned at 100.5 GB (25.8 GB "in flight": the whole
// model's gathered weights twice), and its gathers at 9.4 s of a 14.3 s step.
TEST(Zero3AsFsdp, HoldsTwoUnitsAndHidesItsGathersInsideANode) {
  const GPTConfig m = find_preset("gpt3-6.7b")->config;
  const SystemSpec sys = load_system("dgx-a100-80gb");
  const PlanLayout L = fsdp_node(6);
  const LayoutCost c = evaluate_layout(m, sys, L);
  EXPECT_TRUE(c.fits) << c.why_not;
  // Two units in flight, each the larger of a layer and the embedding, in
  // bf16 weights (2 bytes) and fp32 gradients (4).
  ParamCounter params(m);
  const double layer = double(params.layer_params(1));
  const double embedding = double(m.padded_vocab(1)) * double(m.hidden_size);
  EXPECT_NEAR(c.stages[0].zero3_buffers, 2 * std::max(layer, embedding) * 6, 1.0);
  EXPECT_LT(c.stages[0].zero3_buffers, 3e9);
  // All-gathering 13 GB of bf16 weights over NVSwitch takes ~0.1 s; behind
  // the compute only the first layer's gather of each pass waits.
  EXPECT_LT(c.time.zero3_gather, 0.05 * c.time.step);
  EXPECT_GT(c.time.zero3_gather, 0.0);
  // Across nodes on a slow network the gathers outgrow the compute and wait.
  PlanLayout wide = L;
  wide.par.dp = 64;
  wide.par.global_batch = 64 * 6;
  SystemSpec slow = sys;
  slow.tiers.back().bandwidth /= 100;
  const LayoutCost w = evaluate_layout(m, slow, wide);
  EXPECT_GT(w.time.zero3_gather, 0.5 * w.time.step);
}

// FSDP's reduce_dtype: Composer's 'PURE' mode reduce-scatters bf16 gradients
// (2 bytes), its 'DEFAULT' (0.16.4+) and torchtitan fp32 (4); the planner's
// default for bf16 is Megatron-LM's fp32. Only the reduction's bytes change.
TEST(GradReduceDtype, SetsTheBytesTheGradientReductionMoves) {
  const auto runs = load_published(write_temp(
      "published_reduce.toml", one_run("step-seconds = 1.0", "grad-reduce-dtype = \"bf16\"\n")));
  EXPECT_DOUBLE_EQ(runs.front().layout.grad_reduce_bytes, 2.0);
  EXPECT_TRUE(throws_error_with([] { load_published(write_temp("published_reduce_bad.toml",
                                             one_run("step-seconds = 1.0", "grad-reduce-dtype = \"fp8\"\n"))); },
                                {"grad-reduce-dtype must be fp32, bf16 or fp16 (got 'fp8')"}));

  const GPTConfig m = find_preset("gpt3-6.7b")->config;
  SystemSpec sys = load_system("dgx-a100-80gb");
  sys.tiers.back().bandwidth /= 100;  // the reduction outgrows the compute: all of it shows
  ParamCounter params(m);
  const double layer = double(params.layer_params(1));
  PlanLayout L;
  L.par.dp = 64;
  L.par.micro_batch = 1;
  L.par.global_batch = 64;
  L.par.zero_stage = 3;
  L.precision = Precision::Bf16;
  PlanLayout fp32 = L, bf16 = L;
  fp32.grad_reduce_bytes = 4;
  bf16.grad_reduce_bytes = 2;
  const LayoutCost d = evaluate_layout(m, sys, L), a = evaluate_layout(m, sys, fp32),
                   b = evaluate_layout(m, sys, bf16);
  EXPECT_DOUBLE_EQ(d.time.step, a.time.step);  // bf16's default: fp32 gradients, as Megatron-LM
  // ZeRO-3 as FSDP: each micro-batch reduce-scatters the 32 layers' gradients
  // in its backward; exposed, it waits exactly the bytes it saves less.
  const double all_layers = 32 * layer;
  const double saved = collective_cost(sys, CommOp::ReduceScatter, all_layers * 4, 64, 1, 64).seconds -
                       collective_cost(sys, CommOp::ReduceScatter, all_layers * 2, 64, 1, 64).seconds;
  EXPECT_GT(saved, 0.1);
  EXPECT_NEAR(a.time.zero3_gather - b.time.zero3_gather, saved, 1e-9);
  EXPECT_NEAR(a.time.step - b.time.step, saved, 1e-9);
  // ZeRO-2: the step's one reduce-scatter of the whole model's gradients.
  fp32.par.zero_stage = bf16.par.zero_stage = 2;
  const double model = double(evaluate_layout(m, sys, fp32).stages[0].params);
  EXPECT_NEAR(evaluate_layout(m, sys, fp32).time.dp_reduce - evaluate_layout(m, sys, bf16).time.dp_reduce,
              collective_cost(sys, CommOp::ReduceScatter, model * 4, 64, 1, 64).seconds -
                  collective_cost(sys, CommOp::ReduceScatter, model * 2, 64, 1, 64).seconds,
              1e-9);
}

// A collective beside compute slows that compute (its kernels take SMs and
// memory bandwidth): the GPU files' comm_overlap 0.841 (Lee et al. 2025: 18.9 %
// slower compute while overlapped) makes each second of ZeRO-3 all-gather and
// reduce-scatter that compute covers cost 0.159 s; the pass's first gather and
// last reduce-scatter wait whole, as before.
TEST(Zero3AsFsdp, CollectivesBesideComputeSlowItByTheSystemsOverlap) {
  const GPTConfig m = find_preset("gpt3-6.7b")->config;
  const SystemSpec sys = load_system("dgx-a100-80gb");
  EXPECT_DOUBLE_EQ(sys.comm_overlap, 0.841);
  SystemSpec ideal = sys;
  ideal.comm_overlap = 1.0;
  const PlanLayout L = fsdp_node(6);
  const LayoutCost real = evaluate_layout(m, sys, L), free = evaluate_layout(m, ideal, L);
  ParamCounter params(m);
  const double chunk = 32 * double(params.layer_params(1));
  const double g = collective_cost(sys, CommOp::AllGather, chunk * 2, 8, 1, 8).seconds;
  const double r = collective_cost(sys, CommOp::ReduceScatter, chunk * 4, 8, 1, 8).seconds;
  // Forward: the gathers of layers 2..32; backward: their gathers and the
  // reduce-scatters of layers 32..2; inside one node all of it fits under compute.
  const double covered = 31.0 / 32 * (g + (g + r));
  EXPECT_NEAR(real.time.zero3_gather - free.time.zero3_gather, (1 - 0.841) * covered, 1e-9);
  EXPECT_NEAR(free.time.zero3_gather, (g + (g + r)) / 32, 1e-9);
}

// Eager PyTorch's AdamW (Composer's DecoupledAdamW, torch's foreach AdamW)
// moves 80 bytes a parameter where one fused kernel moves 28, and its clip
// scales every gradient (8 more): 60 bytes a parameter of the shard.
TEST(EagerOptimizer, PaysItsElementWisePassesOverTheShard) {
  const auto runs = load_published(
      write_temp("published_optimizer.toml", one_run("step-seconds = 1.0", "optimizer = \"eager\"\n")));
  EXPECT_TRUE(runs.front().layout.eager_optimizer);
  EXPECT_TRUE(throws_error_with([] { load_published(write_temp("published_optimizer_bad.toml",
                                             one_run("step-seconds = 1.0", "optimizer = \"apex\"\n"))); },
                                {"optimizer must be fused or eager (got 'apex')"}));
  const GPTConfig m = find_preset("gpt3-6.7b")->config;
  const SystemSpec sys = load_system("h100");
  PlanLayout fused = fsdp_node(2);
  PlanLayout eager = fused;
  eager.eager_optimizer = true;
  const LayoutCost a = evaluate_layout(m, sys, fused), b = evaluate_layout(m, sys, eager);
  const double shard = double(a.stages[0].params) / 8;
  const double bandwidth = 3350e9 * 0.846;  // h100.toml: datasheet x memory_efficiency
  EXPECT_NEAR(b.time.optimizer - a.time.optimizer, 60 * shard / bandwidth, 1e-9);
  EXPECT_NEAR(b.time.step - a.time.step, 60 * shard / bandwidth, 1e-9);
  EXPECT_GT(b.time.optimizer - a.time.optimizer, 0.015);  // 0.84B parameters a rank: 17 ms
}

// torchtitan's eager Llama code (9dec370): RMSNorm as .float(), pow, mean,
// multiply, cast and weight (36 bytes an element forward, 92 back), SwiGLU's
// silu and product (10 and 18 an ffn element), RoPE's upcast, complex
// multiply and cast of q and k (20 each way), where the op list prices one
// fused pass each.
TEST(EagerElementwise, PricesTorchtitansLlamaCodeOpByOp) {
  const GPTConfig m = find_preset("llama-3-8b")->config;
  const SystemSpec sys = load_system("h100");
  PlanLayout fused = fsdp_node(2);
  PlanLayout eager = fused;
  eager.eager_elementwise = true;
  const double bw = sys.achieved_memory_bandwidth();
  const double rows = 2.0 * double(m.seq_length), h = double(m.hidden_size), F = double(m.ffn());
  const LayerOps e = layer_ops(m, sys, eager), f = layer_ops(m, sys, fused);
  EXPECT_NEAR(e.forward[Op::LayerNorm], 2 * 36 * rows * h / bw, 1e-12);  // two norms a layer
  EXPECT_NEAR(e.backward[Op::LayerNorm], 2 * 92 * rows * h / bw, 1e-12);
  EXPECT_NEAR(e.forward[Op::Gelu], 10 * rows * F / bw, 1e-12);
  EXPECT_NEAR(e.backward[Op::Gelu], 18 * rows * F / bw, 1e-12);
  EXPECT_GT(e.forward[Op::LayerNorm], 5 * f.forward[Op::LayerNorm]);
  EXPECT_DOUBLE_EQ(e.forward[Op::Gemm], f.forward[Op::Gemm]);
  // RoPE on q (32 heads) and k (8) of 128: 20 bytes an element each way.
  EXPECT_DOUBLE_EQ(eager_rope_bytes(m, eager), 20 * rows * 40 * 128);
  const LayoutCost a = evaluate_layout(m, sys, fused), b = evaluate_layout(m, sys, eager);
  EXPECT_GT(b.time.step - a.time.step,
            32 * ((e.forward[Op::LayerNorm] + e.backward[Op::LayerNorm]) -
                  (f.forward[Op::LayerNorm] + f.backward[Op::LayerNorm]) +
                  2 * eager_rope_bytes(m, eager) / bw));
}

// FSDP1 (Composer's FSDP): autograd copies each layer's bf16 gradients into
// the flat gradient (4 bytes a parameter, compute stream); the post-backward
// stream casts it to an fp32 reduce_dtype (6) and pre-divides it (8) before
// the reduce-scatter: those join the reduce-scatter behind the compute.
TEST(Zero3AsFsdp, Fsdp1CopiesCastsAndPredividesEachUnitsGradient) {
  const GPTConfig m = find_preset("gpt3-6.7b")->config;
  const SystemSpec sys = load_system("h100");
  PlanLayout L = fsdp_node(2);
  L.grad_reduce_bytes = 4;
  PlanLayout f1 = L;
  f1.fsdp1_flat_grads = true;
  const LayoutCost a = evaluate_layout(m, sys, L), b = evaluate_layout(m, sys, f1);
  const double bw = sys.achieved_memory_bandwidth();
  ParamCounter params(m);
  const double layer = double(params.layer_params(1));
  // The copy: 32 layers' backward, one micro-batch a rank.
  EXPECT_NEAR(b.stages[0].ops[Op::Cast] - a.stages[0].ops[Op::Cast], 32 * 4 * layer / bw, 1e-9);
  // The cast and pre-divide ride with the reduce-scatter behind the backward:
  // only the last layer's waits whole, the rest at 1 - comm_overlap.
  const double staging = 32 * (6 + 8) * layer / bw;
  EXPECT_NEAR(b.time.zero3_gather - a.time.zero3_gather,
              staging / 32 + (1 - sys.comm_overlap) * staging * 31 / 32, 1e-9);
  // bf16 reduce_dtype (Composer's PURE): no cast, a 2-byte pre-divide.
  PlanLayout pure = f1;
  pure.grad_reduce_bytes = 2;
  PlanLayout pure0 = L;
  pure0.grad_reduce_bytes = 2;
  EXPECT_NEAR(evaluate_layout(m, sys, pure).time.zero3_gather - evaluate_layout(m, sys, pure0).time.zero3_gather,
              (32 * 4 * layer / bw) * (1.0 / 32 + (1 - sys.comm_overlap) * 31 / 32), 1e-9);
}

// torchtitan's op-level SAC saves SDPA and every other mm (wq, wv, w1, w2 of
// wq wk wv wo w1 w3 w2) and recomputes the rest: wk, wo, w3 and every
// element-wise op, where Megatron's selective recomputes the attention core.
TEST(OpSac, RecomputesTheEvenLinearsAndTheElementWiseWork) {
  const GPTConfig m = find_preset("llama-3-8b")->config;
  const SystemSpec sys = load_system("h100");
  PlanLayout L = fsdp_node(2);
  L.par.recompute = Recompute::Selective;
  L.torchtitan_op_sac = true;
  const LayerOps lo = layer_ops(m, sys, L);
  const Profile r = op_sac_recompute(m, sys, L, lo.forward);
  const int64_t rows = 2 * m.seq_length;
  EXPECT_NEAR(r[Op::Gemm],
              gemm_seconds(sys, Precision::Bf16, {rows, 1024, 4096}) +
                  gemm_seconds(sys, Precision::Bf16, {rows, 4096, 4096}) +
                  gemm_seconds(sys, Precision::Bf16, {rows, 14336, 4096}),
              1e-12);
  // wk + wo + w3: 1024 + 4096 + 14336 of the 4096 + 2 x 1024 + 4096 + 3 x 14336
  // output columns of the forward's linears at k = 4096.
  EXPECT_GT(r[Op::Gemm], 0.3 * lo.forward[Op::Gemm]);
  EXPECT_LT(r[Op::Gemm], 0.45 * lo.forward[Op::Gemm]);
  EXPECT_DOUBLE_EQ(r[Op::Attention], 0.0);
  EXPECT_DOUBLE_EQ(r[Op::LayerNorm], lo.forward[Op::LayerNorm]);
  EXPECT_DOUBLE_EQ(r[Op::Gelu], lo.forward[Op::Gelu]);
  // Megatron's selective recomputes the attention core, which op SAC saves:
  // at seq 8192 that costs more than the three linears and the element-wise
  // passes, so the step is shorter, by exactly the difference, each layer once.
  PlanLayout megatron = L;
  megatron.torchtitan_op_sac = false;
  const Profile attention_core = layer_ops(m, sys, megatron).recompute;
  EXPECT_GT(attention_core[Op::Attention], 0.0);
  // (Less the slowest device's share, which follows the GEMMs and attention.)
  const LayoutCost sac = evaluate_layout(m, sys, L), meg = evaluate_layout(m, sys, megatron);
  EXPECT_NEAR((sac.time.step - sac.time.straggler) - (meg.time.step - meg.time.straggler),
              32 * (r.total() - attention_core.total()), 1e-9);
  EXPECT_TRUE(throws_error_with([] { load_published(write_temp("published_sac.toml",
                                             one_run("step-seconds = 1.0", "torchtitan-op-sac = true\n"))); },
                                {"torchtitan-op-sac needs recompute = \"selective\""}));
}

TEST(Fp8Plans, RunTheLinearGemmsAtTheFp8PeakAndPayForTheirCasts) {
  const GPTConfig m = find_preset("llama-3-8b")->config;
  const SystemSpec sys = load_system("h100");
  ASSERT_GT(sys.peak_flops_fp8, sys.peak_flops_bf16);
  PlanLayout bf16;
  bf16.par.tp = 8;
  bf16.par.micro_batch = 1;
  bf16.par.global_batch = 8;
  bf16.par.sequence_parallel = true;
  PlanLayout fp8 = bf16;
  fp8.fp8 = true;
  const LayoutCost a = evaluate_layout(m, sys, bf16), b = evaluate_layout(m, sys, fp8);
  const Profile& pa = a.stages[0].ops;
  const Profile& pb = b.stages[0].ops;
  EXPECT_LT(pb[Op::Gemm], 0.75 * pa[Op::Gemm]);  // the head stays bf16
  EXPECT_DOUBLE_EQ(pb[Op::Attention], pa[Op::Attention]);
  EXPECT_GT(pb[Op::Cast], pa[Op::Cast]);          // the weights' FP8 copies, once a step
  EXPECT_LT(b.time.step, a.time.step);
  // Transformer Engine keeps the linears' inputs in FP8: on a GPT layer
  // (Korthikanti's 34 sbh with flash attention) the qkv and fc inputs lose 2
  // of the replicated 10, the projection's input 1 and the second MLP GEMM's
  // input 4 of the split 24: 8 + 19.
  const GPTConfig gpt = find_preset("gpt3-6.7b")->config;
  const double sbh = 2048.0 * 4096;
  EXPECT_DOUBLE_EQ(korthikanti_layer_bytes(gpt, 1, 8, true, Recompute::None, true, true),
                   sbh / 8 * (8 + 19));
  EXPECT_DOUBLE_EQ(korthikanti_layer_bytes(gpt, 1, 8, false, Recompute::None, true, true),
                   sbh * (8 + 19.0 / 8));
  // Full recompute keeps the layer's 16-bit input alone, FP8 or not.
  EXPECT_DOUBLE_EQ(korthikanti_layer_bytes(gpt, 1, 8, false, Recompute::Full, true, true), 2 * sbh);
  EXPECT_LT(b.stages[0].layer_activations, a.stages[0].layer_activations);
  // FP8 copies of the weights and their transposes: 2 bytes a parameter.
  EXPECT_NEAR(b.stages[0].state.params - a.stages[0].state.params,
              2.0 * double(a.stages[0].params), 1.0);
  // torchao's Float8Linear (torchtitan) keeps no copy: each linear casts its
  // weight as it runs forward (read 2, write 1 bytes a weight, per micro-
  // batch) instead of once a step.
  PlanLayout torchao = fp8;
  torchao.fp8_torchao = true;
  const LayoutCost c = evaluate_layout(m, sys, torchao);
  EXPECT_DOUBLE_EQ(c.stages[0].state.params, a.stages[0].state.params);
  EXPECT_GT(c.stages[0].ops[Op::Gemm], b.stages[0].ops[Op::Gemm]);  // the casts ride on the GEMMs
  EXPECT_LT(c.stages[0].ops[Op::Cast], b.stages[0].ops[Op::Cast]);  // no once-a-step copy
  EXPECT_TRUE(throws_error_with([] { load_published(write_temp("published_recipe.toml",
                                             one_run("step-seconds = 1.0", "fp8-recipe = \"torchao\"\n"))); }, {"fp8-recipe needs precision = \"fp8\""}));
  EXPECT_TRUE(throws_error_with([] { load_published(write_temp("published_recipe2.toml",
                                             one_run("step-seconds = 1.0", "fp8-recipe = \"msamp\"\n"))); }, {"fp8-recipe must be te or torchao"}));
}

}  // namespace

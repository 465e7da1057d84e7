// The planner for the Llama family (issue 17): the Llama 3 presets with
// their published shapes and parameter counts, model files with Megatron's
// keys, memory per rank of llama-3-70b against a hand calculation, and no
// embedding-gradient sum between the first and last stages of an untied
// model.
#include <gtest/gtest.h>

#include "expect_error.h"
#include "temp_file.h"
#include "tessera/bridge/run_plan.h"
#include "tessera/cli/train_run.h"
#include "tessera/model/flops.h"
#include "tessera/model/param_layout.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/memory_model.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/system.h"
#include "tiny_system_toml.h"

using namespace tessera;
using namespace tessera::plan;

namespace {

SystemSpec h100() {
  return load_system(std::string(TESSERA_SOURCE_DIR) + "/configs/systems/h100.toml");
}

void expect_llama_switches(const GPTConfig& m, const std::string& name) {
  EXPECT_TRUE(m.rmsnorm()) << name;
  EXPECT_FLOAT_EQ(m.norm_epsilon, 1e-5f) << name;
  EXPECT_TRUE(m.swiglu) << name;
  EXPECT_TRUE(m.rope()) << name;
  EXPECT_TRUE(m.untie_embeddings) << name;
  EXPECT_FALSE(m.add_bias_linear) << name;
}

}  // namespace

// Meta's config.json of each model (hidden_size, intermediate_size,
// num_hidden_layers, num_attention_heads, num_key_value_heads, vocab_size,
// rope_theta, rms_norm_eps, tie_word_embeddings false).
TEST(LlamaPresets, PublishedShapes) {
  struct Shape {
    const char* name;
    int64_t layers, hidden, heads, kv_heads, ffn;
  };
  for (const Shape& s : {Shape{"llama-3-8b", 32, 4096, 32, 8, 14336},
                         Shape{"llama-3-70b", 80, 8192, 64, 8, 28672},
                         Shape{"llama-3-405b", 126, 16384, 128, 8, 53248}}) {
    const GPTConfig m = load_model(s.name);
    EXPECT_EQ(m.num_layers, s.layers) << s.name;
    EXPECT_EQ(m.hidden_size, s.hidden) << s.name;
    EXPECT_EQ(m.num_heads, s.heads) << s.name;
    EXPECT_EQ(m.kv_heads(), s.kv_heads) << s.name;
    EXPECT_EQ(m.ffn(), s.ffn) << s.name;
    EXPECT_EQ(m.vocab_size, 128256) << s.name;
    EXPECT_EQ(m.seq_length, 8192) << s.name;
    EXPECT_FLOAT_EQ(m.rotary_base, 500000.0f) << s.name;
    expect_llama_switches(m, s.name);
  }
  // configs/llama-tiny.toml's model (LlamaTiny.PresetIsTheConfigsRun checks
  // it against the file).
  const GPTConfig t = load_model("llama-tiny");
  EXPECT_EQ(t.num_layers, 4);
  EXPECT_EQ(t.hidden_size, 256);
  EXPECT_EQ(t.num_heads, 4);
  EXPECT_EQ(t.kv_heads(), 2);
  EXPECT_EQ(t.ffn(), 640);  // SwiGLU's default: 4 * 256 * 2 / 3 rounded down to 64
  expect_llama_switches(t, "llama-tiny");
  // The names people type.
  EXPECT_EQ(load_model("70B").hidden_size, 8192);
  EXPECT_EQ(load_model("Llama-3.1-405B").num_layers, 126);
}

// The parameter count, by hand from the shapes, and against the published
// 8.03B, 70.6B and 405.9B (within 0.5 %).
TEST(LlamaPresets, ParameterCountsByHandAndPublished) {
  struct Count {
    const char* name;
    double published;
  };
  for (const Count& c : {Count{"llama-3-8b", 8.03e9}, Count{"llama-3-70b", 70.6e9},
                         Count{"llama-3-405b", 405.9e9}}) {
    const GPTConfig m = load_model(c.name);
    const int64_t C = m.hidden_size, F = m.ffn(), hs = m.head_size();
    // Per layer: q (NH hs x C), k and v (KVH hs x C each), o (C x NH hs),
    // gate, up and down (3 C F), two RMSNorm weights; no biases.
    const int64_t layer = (m.num_heads + 2 * m.kv_heads()) * hs * C + C * m.num_heads * hs +
                          3 * C * F + 2 * C;
    // Token table and untied lm_head (V x C each), final norm; no position table.
    const int64_t by_hand = m.num_layers * layer + 2 * m.vocab_size * C + C;
    EXPECT_EQ(ParamLayout::count_model_params(m), by_hand) << c.name;
    EXPECT_NEAR(double(by_hand) / c.published, 1.0, 0.005) << c.name;
  }
  // 70B exactly: 80 x 855,654,400 + 2 x 128256 x 8192 + 8192.
  EXPECT_EQ(ParamLayout::count_model_params(load_model("llama-3-70b")), 70553706496);
}

// A model file in `tessera train`'s (Megatron's) keys describes a Llama.
TEST(LlamaModelFile, MegatronKeysDescribeTheFamily) {
  const std::string f = write_temp(
      "llama_model.toml",
      "num-layers = 32\nhidden-size = 4096\nnum-attention-heads = 32\nseq-length = 8192\n"
      "vocab-size = 128256\nffn-hidden-size = 14336\nnormalization = \"RMSNorm\"\n"
      "norm-epsilon = 1e-5\nswiglu = true\nposition-embedding-type = \"rope\"\n"
      "rotary-base = 500000\ngroup-query-attention = true\nnum-query-groups = 8\n"
      "untie-embeddings-and-output-weights = true\ndisable-bias-linear = true\n");
  const GPTConfig m = load_model_file(f);
  const GPTConfig p = load_model("llama-3-8b");
  EXPECT_EQ(m.summary(), p.summary());
  EXPECT_EQ(ParamLayout::count_model_params(m), ParamLayout::count_model_params(p));
  EXPECT_FLOAT_EQ(m.norm_epsilon, 1e-5f);
  EXPECT_EQ(m.add_bias_linear, false);
}

TEST(LlamaModelFile, BadValuesNameTheFileAndKey) {
  const std::string head =
      "num-layers = 2\nhidden-size = 64\nnum-attention-heads = 4\nseq-length = 32\n";
  const std::string norm = write_temp("llama_bad_norm.toml", head + "normalization = \"rms\"\n");
  EXPECT_TRUE(test::throws_error_with([&] { load_model_file(norm); },
                                      {norm, "normalization", "RMSNorm", "rms"}));
  const std::string pos =
      write_temp("llama_bad_pos.toml", head + "position-embedding-type = \"rotary\"\n");
  EXPECT_TRUE(test::throws_error_with([&] { load_model_file(pos); },
                                      {pos, "position-embedding-type", "rope"}));
  const std::string swiglu = write_temp("llama_bad_swiglu.toml", head + "swiglu = 1\n");
  EXPECT_TRUE(test::throws_error_with([&] { load_model_file(swiglu); }, {swiglu, "'swiglu'"}));
  // num-query-groups without group-query-attention (Megatron would ignore it).
  const std::string groups = write_temp("llama_bad_groups.toml", head + "num-query-groups = 2\n");
  EXPECT_TRUE(test::throws_error_with([&] { load_model_file(groups); },
                                      {groups, "group-query-attention"}));
  // GPTConfig::validate's own checks name the flag: 4 heads, 3 groups.
  const std::string three = write_temp(
      "llama_bad_three.toml", head + "group-query-attention = true\nnum-query-groups = 3\n");
  EXPECT_TRUE(test::throws_error_with([&] { load_model_file(three); },
                                      {three, "--num-query-groups"}));
}

// What `plan` prints as the best layout's train command and --emit-config
// reads back as the same model.
TEST(LlamaModelFile, EmittedTrainKeysReadBackAsTheSameModel) {
  for (const char* name : {"llama-3-70b", "llama-tiny"}) {
    const GPTConfig m = load_model(name);
    const std::string text = bridge::train_config_toml(bridge::model_keys(m), "emitted");
    const std::string f = write_temp(std::string("llama_emitted_") + name + ".toml", text);
    const GPTConfig back = load_model_file(f);
    EXPECT_EQ(back.summary(), m.summary()) << text;
    EXPECT_FLOAT_EQ(back.norm_epsilon, m.norm_epsilon) << name;
    EXPECT_EQ(back.ffn(), m.ffn()) << name;
  }
  // GPT models emit none of the family's keys.
  const std::string gpt = bridge::train_config_toml(bridge::model_keys(load_model("gpt3-175b")), "");
  EXPECT_EQ(gpt.find("swiglu"), std::string::npos) << gpt;
  EXPECT_EQ(gpt.find("normalization"), std::string::npos) << gpt;
}

// Korthikanti's activation accounting with the family's widths, by hand.
TEST(LlamaMemory, ActivationsPerLayerByHand) {
  const GPTConfig m = load_model("llama-3-70b");
  const double s = 8192, b = 1, h = 8192, t = 8, sbh = s * b * h;
  // In 16-bit words of h per token: norms' inputs 4 and outputs 4 (no dropout
  // masks: the model trains without dropout); q k v 2 (64 + 2 x 8) / 64 = 2.5;
  // the projection's input 2; SwiGLU's fc output 2 x 2F / h and product 2F / h
  // = 6 x 28672 / 8192 = 21.
  const double replicated = 8, split = 2.5 + 2 + 21;
  EXPECT_DOUBLE_EQ(korthikanti_layer_bytes(m, 1, 8, true, Recompute::Selective, true),
                   sbh / t * (replicated + split));
  EXPECT_DOUBLE_EQ(korthikanti_layer_bytes(m, 1, 8, false, Recompute::None, true),
                   sbh * (replicated + split / t));
  // Without flash: the scores' 5 a s / h, split over tp.
  EXPECT_DOUBLE_EQ(korthikanti_layer_bytes(m, 1, 8, false, Recompute::None, false),
                   sbh * (replicated + (split + 5 * 64 * s / h) / t));
  // With dropout the two masks come back (Korthikanti's 10).
  GPTConfig d = m;
  d.hidden_dropout = 0.1f;
  EXPECT_DOUBLE_EQ(korthikanti_layer_bytes(d, 1, 8, true, Recompute::None, true),
                   sbh / t * (replicated + 2 + split));
}

// Memory per rank of llama-3-70b on 64 H100s: tp 8, pp 4, dp 2, micro-batch
// 1, 16 micro-batches, ZeRO-1, SP, selective recompute, 1F1B, bf16 with
// fp32 master weights and Adam. Megatron-LM keeps bf16 gradients in fp32
// (its arguments force accumulate_allreduce_grads_in_fp32 for bf16): 2 + 4 +
// 12 bytes a parameter, the 12 over dp.
TEST(LlamaMemory, SeventyBOn64H100sByHand) {
  const GPTConfig m = load_model("llama-3-70b");
  PlanLayout L;
  L.par.tp = 8, L.par.pp = 4, L.par.dp = 2;
  L.par.micro_batch = 1, L.par.global_batch = 32;
  L.par.zero_stage = 1;
  L.par.sequence_parallel = true;
  L.par.recompute = Recompute::Selective;
  L.par.schedule = ScheduleKind::OneFOneB;
  CostOptions all;
  all.all_stages = true;
  const LayoutCost c = evaluate_layout(m, h100(), L, all);
  ASSERT_EQ(c.stages.size(), 4u);

  // Parameters on tp rank 0. Vocabulary padded to a multiple of 128 x tp =
  // 1024: 129024 rows, 16128 per rank.
  const double table = 16128.0 * 8192;                // 132,120,576 (wte or lm_head)
  const double qkv = (64 + 2 * 8) * 128 / 8 * 8192.0;  // 1280 rows: 10,485,760
  const double proj = 8192.0 * 1024;                  // 8,388,608
  const double fc = 2 * 28672 / 8 * 8192.0;           // gate and up, 7168 rows: 58,720,256
  const double down = 8192.0 * 3584;                  // 29,360,128
  const double norms = 2 * 8192.0;
  const double layer = qkv + proj + fc + down + norms;  // 106,971,136 (a multiple of 16 dp)
  EXPECT_EQ(layer, 106971136.0);
  const double first = table + 20 * layer;          // 2,271,543,296
  const double last = 20 * layer + 8192 + table;    // + ln_f: 2,271,551,488
  EXPECT_EQ(double(c.stages[0].params), first);
  EXPECT_EQ(double(c.stages[1].params), 20 * layer);
  EXPECT_EQ(double(c.stages[3].params), last);
  EXPECT_DOUBLE_EQ(c.stages[0].state.params, 2 * first);
  EXPECT_DOUBLE_EQ(c.stages[0].state.grads, 4 * first);
  EXPECT_DOUBLE_EQ(c.stages[0].state.optimizer, 12 * first / 2);

  // Activations: 33.5 words of h per token per layer, / tp under SP
  // (ActivationsPerLayerByHand), 2 bytes each: 281,018,368 per layer.
  const double per_layer = 8192.0 * 8192 / 8 * 33.5;
  // Stage 0 holds min(16, 4 - 0) = 4 micro-batches of its 20 layers, plus one
  // layer materialised while backward recomputes it; no embedding dropout
  // mask (no dropout).
  EXPECT_EQ(c.stages[0].in_flight, 4);
  EXPECT_DOUBLE_EQ(c.stages[0].activations, (4 * 20 + 1) * per_layer);
  // The last stage: one micro-batch, and its fp32 logits and their gradient
  // over its 16128 vocabulary rows: 8 s b V / t.
  EXPECT_DOUBLE_EQ(c.stages[3].activations, (20 + 1) * per_layer + 8.0 * 8192 * 16128);
  // Stage 0 in all: 12 bytes a parameter + activations = 50.02 GB.
  const double stage0 = 12 * first + 81 * per_layer;
  EXPECT_DOUBLE_EQ(c.stages[0].memory(), stage0);
  EXPECT_NEAR(stage0 / 1e9, 50.021, 0.001);
  EXPECT_TRUE(c.fits);
}

// Untied: the first stage's wte and the last stage's lm_head are different
// parameters, so nothing is summed between them; tied, the sum is there.
TEST(LlamaPipeline, UntiedModelsNeedNoEmbeddingSync) {
  GPTConfig m = load_model("llama-3-8b");
  PlanLayout L;
  L.par.tp = 2, L.par.pp = 4, L.par.dp = 1;
  L.par.micro_batch = 1, L.par.global_batch = 8;
  const LayoutCost untied = evaluate_layout(m, h100(), L);
  EXPECT_EQ(untied.time.embedding_sync, 0.0);
  m.untie_embeddings = false;
  const LayoutCost tied = evaluate_layout(m, h100(), L);
  EXPECT_GT(tied.time.embedding_sync, 0.0);
  // One synchronisation fewer per step, the rest the same.
  EXPECT_NEAR(tied.time.sync_wait - untied.time.sync_wait, h100().sync_wait, 1e-15);
}

// MFU's FLOPs: Megatron-LM's count for GQA and SwiGLU (its
// num_floating_point_operations): 12 s L h^2 ((1 + G / NH + s / h) + 1.5 F / h
// + V / (2 L h)) per sequence for forward and backward.
TEST(LlamaFlops, MegatronCount) {
  for (const char* name : {"llama-3-8b", "llama-3-70b", "llama-3-405b"}) {
    const GPTConfig m = load_model(name);
    const double s = double(m.seq_length), L = double(m.num_layers), h = double(m.hidden_size);
    const double G = double(m.kv_heads()), NH = double(m.num_heads), F = double(m.ffn());
    const double V = double(m.vocab_size);
    const double megatron =
        12 * s * L * h * h * ((1 + G / NH + s / h) + 1.5 * F / h + V / (2 * L * h));
    EXPECT_NEAR(step_flops(m, 1, Recompute::None).model / megatron, 1.0, 1e-12) << name;
  }
}

// RMSNorm and SwiGLU are priced by calibrate's own measurements of them
// (the [kernels] table's rmsnorm_* and swiglu_*), else by the bytes the op
// list says they move over the bandwidth.
TEST(LlamaKernels, MeasuredRmsnormAndSwigluMoveThePrediction) {
  const std::string& base = kTinySystemToml;
  const SystemSpec plain = load_system_file(write_temp("llama_k1.toml", base));
  const SystemSpec measured = load_system_file(write_temp(
      "llama_k2.toml", base + "[kernels]\nrmsnorm_forward = 2.5\nswiglu_forward = 4.0\n"));
  GPTConfig m{.num_layers = 2, .hidden_size = 128, .num_heads = 4, .seq_length = 64,
              .vocab_size = 512};
  m.normalization = Normalization::RMSNorm;
  m.swiglu = true;  // F = 4 x 128 x 2 / 3 rounded down to 64: 320
  m.position_embedding = PositionEmbedding::Rope;
  m.num_query_groups = 2;
  m.untie_embeddings = true;
  m.add_bias_linear = false;
  ASSERT_EQ(m.ffn(), 320);
  PlanLayout L;  // dp 2, one micro-batch of 4 sequences each, fp32
  L.par.dp = 2;
  L.par.micro_batch = 4;
  L.par.global_batch = 8;
  L.precision = Precision::Fp32;
  const LayoutCost a = evaluate_layout(m, plain, L);
  const LayoutCost b = evaluate_layout(m, measured, L);
  const double rows = 4.0 * 64, C = 128, F = 320;
  // RMSNorm forward, 2 per layer and the final one: x and y (8 bytes an
  // element), w read (4 C), rstd written (4 a row); or 2.5 ns an element.
  const double norm_plain = 5 * (rows * C * 8 + C * 4 + rows * 4) / 10e9;
  const double norm_measured = 5 * rows * C * 2.5e-9;
  EXPECT_NEAR(b.stages[0].ops[Op::LayerNorm] - a.stages[0].ops[Op::LayerNorm],
              norm_measured - norm_plain, 1e-12);
  // SwiGLU forward, 1 per layer: gate and up read, the product written (12
  // bytes an output element); or 4 ns an output element.
  const double swiglu_plain = 2 * rows * F * 12 / 10e9;
  const double swiglu_measured = 2 * rows * F * 4e-9;
  EXPECT_NEAR(b.stages[0].ops[Op::Gelu] - a.stages[0].ops[Op::Gelu],
              swiglu_measured - swiglu_plain, 1e-12);
}

// The llama-tiny preset is the model `tessera train --config
// configs/llama-tiny.toml` trains (read by train's own parser, the
// vocabulary from the embedded corpus's tokenizer), and `plan --model` of
// that file (a model file in train's keys) is too.
TEST(LlamaTiny, PresetIsTheConfigsRun) {
  const std::string file = std::string(TESSERA_SOURCE_DIR) + "/configs/llama-tiny.toml";
  const GPTConfig run = cli::read_planned_run(file).model;
  const GPTConfig preset = load_model("llama-tiny");
  EXPECT_EQ(preset.summary(), run.summary());
  EXPECT_FLOAT_EQ(preset.norm_epsilon, run.norm_epsilon);
  EXPECT_EQ(ParamLayout::count_model_params(preset), ParamLayout::count_model_params(run));
  GPTConfig as_model_file = load_model(file, cli::is_train_flag);
  as_model_file.vocab_size = run.vocab_size;  // a model file without vocab-size: GPT-2's
  EXPECT_EQ(as_model_file.summary(), run.summary());
}

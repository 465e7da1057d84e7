// FlashAttention in Triton (`attention-kernel = "triton"` of a published run,
// PlanLayout::triton_attention; [gemm] triton_attention_rate and
// triton_attention_backward_rate, SystemSpec::triton_attention_factor):
// llm-foundry's MPT tables ran it (bench/published/llmfoundry.toml, header).
// A run marked so prices its forward and recomputation at the forward
// factor and its backward at the backward one; unmarked runs and the other
// op classes are unchanged; the keys are refused outside (0, 1]; a run that
// asks for the kernel on a system without both figures, with an unknown
// kernel name, or without flash attention is refused naming what is wrong.
#include <gtest/gtest.h>

#include <string>

#include "tessera/model/op_list.h"
#include "tessera/plan/layer_ops.h"
#include "tessera/plan/layout.h"
#include "tessera/plan/published.h"
#include "tessera/plan/system.h"
#include "attention_entry.h"
#include "expect_error.h"
#include "shipped_system_path.h"
#include "temp_file.h"
#include "tiny_system_toml.h"

using namespace tessera;
using namespace tessera::plan;
using tessera::test::throws_error_with;

namespace {

const std::string kGemm =
    "[gemm]\nattention_efficiency = 0.5\nattention_backward_efficiency = 0.4\n"
    "triton_attention_rate = 0.8\ntriton_attention_backward_rate = 0.5\n";

// A run of an MPT-like GPT on 8 A100s whose attention is `kernel` (a line, or empty).
std::string mpt_run(const std::string& system, const std::string& lines) {
  return R"([source]
key = "test"
citation = "made up for a test"
flops = "6nd-attn"
[[run]]
name = "mpt 7b"
system = ")" + system + R"("
model = "gpt3-6.7b"
devices = 8
micro-batch-size = 2
global-batch-size = 16
zero-stage = 3
precision = "bf16"
step-seconds = 5.0
)" + lines;
}

}  // namespace

TEST(TritonAttention, EachPassIsPricedAtItsOwnFactor) {
  const SystemSpec sys = load_system_text(kTinySystemToml + kGemm, "triton");
  EXPECT_DOUBLE_EQ(sys.triton_attention_factor(false), 0.8);
  EXPECT_DOUBLE_EQ(sys.triton_attention_factor(true), 0.5);
  PlanLayout flash;
  flash.precision = Precision::Fp32;
  PlanLayout triton = flash;
  triton.triton_attention = true;
  // Time is FLOPs over rate: the forward and its recomputation 1 / 0.8
  // slower, the backward 1 / 0.5, each on top of its own flash rate.
  for (OpPhase phase : {OpPhase::Forward, OpPhase::Recompute}) {
    const OpEntry e = attention_entry(phase);
    EXPECT_NEAR(op_seconds(e, sys, triton) / op_seconds(e, sys, flash), 1 / 0.8, 1e-12);
  }
  const OpEntry bwd = attention_entry(OpPhase::Backward);
  EXPECT_NEAR(op_seconds(bwd, sys, triton) / op_seconds(bwd, sys, flash), 1 / 0.5, 1e-12);
  // Not an attention entry: unchanged.
  OpEntry gemm;
  gemm.cls = OpClass::Gemm;
  gemm.op = Op::Gemm;
  gemm.m = gemm.n = gemm.k = 1024;
  gemm.batch = 1;
  gemm.flops = 2.0 * 1024 * 1024 * 1024;
  EXPECT_DOUBLE_EQ(op_seconds(gemm, sys, triton), op_seconds(gemm, sys, flash));
}

TEST(TritonAttention, SystemFileRefusesAFactorOutsideItsRange) {
  for (const char* key : {"triton_attention_rate", "triton_attention_backward_rate"})
    for (const char* v : {"0", "-0.5", "1.2", "nan"}) {
      const std::string path =
          write_temp("tessera_triton_bad.toml", kTinySystemToml + "[gemm]\n" + key + " = " + v + "\n");
      EXPECT_TRUE(throws_error_with([&] { load_system_file(path); }, {path, std::string("gemm.") + key}))
          << key << " = " << v;
    }
}

TEST(TritonAttention, ShippedFilesOfLlmFoundrysGpusGiveTheFlashAttention2PapersRatios) {
  // Dao 2023, sec. 4.1: FlashAttention-2 about 1.3-1.5x FlashAttention in
  // Triton's speed forward (low end taken), about 2x backward.
  for (const char* name : {"h100", "dgx-a100-80gb", "dgx-a100-40gb"}) {
    const SystemSpec s = load_system_file(shipped_system_path(name));
    EXPECT_NEAR(s.triton_attention_rate, 1 / 1.3, 0.005) << name;
    EXPECT_DOUBLE_EQ(s.triton_attention_backward_rate, 1 / 2.0) << name;
  }
  for (const char* name : {"local", "h100-gt96", "h100-2025", "h200", "dgx-a100-80gb-2021", "frontier"}) {
    const SystemSpec s = load_system_file(shipped_system_path(name));
    EXPECT_DOUBLE_EQ(s.triton_attention_rate, 0.0) << name;
    EXPECT_DOUBLE_EQ(s.triton_attention_backward_rate, 0.0) << name;
  }
}

TEST(TritonAttention, APublishedRunNamesItsKernel) {
  const auto runs = load_published(write_temp("published_triton.toml",
                                              mpt_run("dgx-a100-80gb", "attention-kernel = \"triton\"\n")));
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_TRUE(runs[0].layout.triton_attention);
  const auto plain = load_published(write_temp("published_flash.toml", mpt_run("dgx-a100-80gb", "")));
  EXPECT_FALSE(plain[0].layout.triton_attention);
  // The Triton run is slower by its attention alone.
  const PublishedValidation a = validate_published(runs), b = validate_published(plain);
  EXPECT_GT(a.rows[0].cost.time.step, b.rows[0].cost.time.step);
  EXPECT_GT(a.rows[0].cost.stages[0].ops[Op::Attention], b.rows[0].cost.stages[0].ops[Op::Attention]);
  EXPECT_DOUBLE_EQ(a.rows[0].cost.stages[0].ops[Op::Gemm], b.rows[0].cost.stages[0].ops[Op::Gemm]);
}

TEST(TritonAttention, BadRunsAreRefusedNamingTheKey) {
  EXPECT_TRUE(throws_error_with(
      [] { load_published(write_temp("published_triton_name.toml", mpt_run("h100", "attention-kernel = \"cuda\"\n"))); },
      {"attention-kernel must be flash or triton", "'cuda'"}));
  EXPECT_TRUE(throws_error_with(
      [] {
        load_published(write_temp("published_triton_unfused.toml",
                                  mpt_run("h100", "attention-kernel = \"triton\"\nflash-attention = false\n")));
      },
      {"needs flash-attention = true"}));
  // h100-gt96 gives no Triton figures: refused when planned, naming both keys.
  EXPECT_TRUE(throws_error_with(
      [] {
        validate_published(load_published(
            write_temp("published_triton_nosys.toml", mpt_run("h100-gt96", "attention-kernel = \"triton\"\n"))));
      },
      {"h100-gt96", "gemm.triton_attention_rate", "gemm.triton_attention_backward_rate"}));
}

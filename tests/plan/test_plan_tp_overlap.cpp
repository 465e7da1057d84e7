// --tp-comm-overlap (Megatron-LM with Transformer Engine's userbuffers): a
// sequence-parallel layer's tensor-parallel all-gathers and reduce-scatters
// are cut into tp chunks that move behind the GEMM beside each, so only
// max(0, comm - gemm (tp - 1) / tp) of each waits (issue 33's TP term).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "expect_error.h"
#include "temp_file.h"
#include "tessera/plan/layer_ops.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/published.h"
#include "tessera/plan/system.h"

using namespace tessera;
using namespace tessera::plan;

namespace {

// GPT-3 175B's layer at tp 8 with sequence parallelism on DGX H100.
PlanLayout layout(bool sp, bool overlap) {
  PlanLayout L;
  L.par.tp = 8;
  L.par.pp = 1;
  L.par.dp = 1;
  L.par.micro_batch = 1;
  L.par.global_batch = 1;
  L.par.sequence_parallel = sp;
  L.tp_comm_overlap = overlap;
  return L;
}

// The seconds of the n-th entry of `phase` whose `what` and kernel match
// (a collective's `what` is empty: it reads no parameter).
double seconds_of(const OpList& ol, OpPhase phase, const char* what, const char* kernel,
                  const SystemSpec& sys, const PlanLayout& L, int n = 0) {
  for (const OpEntry& e : ol.layer)
    if (e.phase == phase && std::strcmp(e.what, what) == 0 && std::strcmp(e.kernel, kernel) == 0)
      if (n-- == 0) return op_seconds(e, sys, L);
  ADD_FAILURE() << "no " << what << " " << kernel;
  return 0;
}

}  // namespace

TEST(TpCommOverlap, EachForwardCollectiveWaitsOnlyForWhatItsGemmCannotCover) {
  const SystemSpec sys = load_system("h100");
  const GPTConfig m = find_preset("gpt3-175b")->config;
  const PlanLayout off = layout(true, false), on = layout(true, true);
  const OpList ol = op_list(op_list_config(m, off));
  const double without = layer_ops(ol, sys, off).forward[Op::Comm];
  const double with = layer_ops(ol, sys, on).forward[Op::Comm];
  ASSERT_GT(without, 0.0);
  // The four pairs of a forward: the gathered LayerNorm outputs feed qkv and
  // fc; attn_proj's and mlp_proj's partial sums are reduce-scattered.
  const auto F = OpPhase::Forward;
  // (the n-th collective of its kind in the forward, and the GEMM it pairs with)
  auto exposed = [&](const char* coll, int n, const char* gemm_what) {
    const double c = seconds_of(ol, F, "", coll, sys, off, n);
    const double g = seconds_of(ol, F, gemm_what, "matmul_forward", sys, off);
    return std::max(0.0, c - g * 7.0 / 8.0);
  };
  const double expected = exposed("all_gather", 0, "attn.qkv") +
                          exposed("reduce_scatter", 0, "attn.proj") +
                          exposed("all_gather", 1, "mlp.fc") +
                          exposed("reduce_scatter", 1, "mlp.proj");
  EXPECT_NEAR(with, expected, 1e-12 * without);
  EXPECT_LT(with, 0.5 * without);  // NVLink 4 at tp 8: the GEMMs cover most of it
  // The GEMMs themselves are priced as before.
  EXPECT_DOUBLE_EQ(layer_ops(ol, sys, on).forward[Op::Gemm], layer_ops(ol, sys, off).forward[Op::Gemm]);
  // Backward's collectives are covered too.
  EXPECT_LT(layer_ops(ol, sys, on).backward[Op::Comm], layer_ops(ol, sys, off).backward[Op::Comm]);
}

TEST(TpCommOverlap, AllReducesWithoutSequenceParallelismStayExposed) {
  const SystemSpec sys = load_system("h100");
  const GPTConfig m = find_preset("gpt3-175b")->config;
  const OpList ol = op_list(op_list_config(m, layout(false, false)));
  const LayerOps off = layer_ops(ol, sys, layout(false, false));
  const LayerOps on = layer_ops(ol, sys, layout(false, true));
  EXPECT_DOUBLE_EQ(on.forward[Op::Comm], off.forward[Op::Comm]);
  EXPECT_DOUBLE_EQ(on.backward[Op::Comm], off.backward[Op::Comm]);
}

TEST(TpCommOverlap, APublishedRowNeedsSequenceParallelism) {
  const std::string row = R"([source]
key = "test"
citation = "made up for a test"
[[run]]
name = "tp overlap"
system = "h100"
model = "gpt3-6.7b"
devices = 8
tensor-model-parallel-size = 8
micro-batch-size = 1
global-batch-size = 8
precision = "bf16"
tp-comm-overlap = true
step-seconds = 1.0
)";
  EXPECT_TRUE(tessera::test::throws_error_with(
      [&] { load_published(write_temp("published_tpo.toml", row)); },
      {"run 'tp overlap': tp-comm-overlap needs sequence-parallel"}));
  const auto runs = load_published(
      write_temp("published_tpo_sp.toml", row + "sequence-parallel = true\n"));
  EXPECT_TRUE(runs.front().layout.tp_comm_overlap);
  EXPECT_NE(runs.front().layout.str().find("tpo"), std::string::npos);
}

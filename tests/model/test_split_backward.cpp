// The split backward of the zero-bubble schedule (model/block.h's
// LayerGradStash, GPT::backward_stage_input / backward_stage_weight), one
// process: three micro-batches run as zb-h1 runs them (B0 B1 W0 B2 W1 W2:
// weight passes deferred behind input passes) give the combined backward's
// gradients bit for bit, GPT-2 and Llama, fp32, bf16 and fp16, with dropout
// and recomputation (which the weight pass runs again); and
// the stash's size is its four dY views.
#include <gtest/gtest.h>

#include "tiny_model.h"

#include <cstring>
#include <vector>

#include "tessera/core/rng.h"
#include "tessera/model/block.h"
#include "tessera/model/flops.h"
#include "tessera/model/gpt.h"

namespace tessera {
namespace {

constexpr int64_t kB = 2, kM = 3;  // sequences per micro-batch, micro-batches

struct Case {
  const char* name;
  bool llama;
  Precision precision;
  float dropout;
  Recompute recompute = Recompute::None;
};

// Every parameter's gradient after the three micro-batches, split or not.
std::vector<float> gradients(const Case& c, bool split) {
  GPTConfig m = c.llama ? test::tiny_llama(2) : test::tiny_gpt(2);
  m.hidden_dropout = m.attention_dropout = c.dropout;
  const ParamLayout layout = ParamLayout::build(m, ParallelConfig{}, 0, 0);
  GPT model(m, layout, {.precision = c.precision, .recompute = c.recompute});
  model.init(11);
  model.refresh_working_copy();
  const StageChunk chunk = model.stage_chunk(0, 1);  // every layer, the embedding and the head
  const ActShape shape = model.act_shape(kB, m.seq_length);
  const int64_t N = shape.N(), per_layer = layer_grad_stash_bytes(shape);
  std::vector<Activations> acts(kM);
  std::vector<std::vector<int32_t>> in(kM, std::vector<int32_t>(size_t(N))), tgt = in;
  std::vector<std::vector<char>> stash_mem(kM, std::vector<char>(size_t(shape.L * per_layer)));
  std::vector<std::vector<LayerGradStash>> stash(kM);
  for (int64_t mb = 0; mb < kM; ++mb) {
    activations_init(acts[size_t(mb)], shape);
    for (int64_t l = 0; l < shape.L; ++l)
      stash[size_t(mb)].push_back(
          layer_grad_stash_place(shape, stash_mem[size_t(mb)].data() + l * per_layer));
    for (int64_t i = 0; i < N; ++i) {
      in[size_t(mb)][size_t(i)] = int32_t(rng_u64(5, uint64_t(mb), uint64_t(i)) % 67);
      tgt[size_t(mb)][size_t(i)] = int32_t(rng_u64(6, uint64_t(mb), uint64_t(i)) % 67);
    }
    acts[size_t(mb)].dropout = {c.dropout > 0, 9, 1, mb * kB};
    model.forward_stage(acts[size_t(mb)], chunk, in[size_t(mb)].data(), tgt[size_t(mb)].data());
  }
  const float dloss = 1.0f / float(kM * N);
  auto input_pass = [&](int64_t mb) {
    Activations& a = acts[size_t(mb)];
    a.first_backward_of_step = mb == 0;
    if (split)
      model.backward_stage_input(a, chunk, in[size_t(mb)].data(), tgt[size_t(mb)].data(), dloss,
                                 stash[size_t(mb)].data());
    else
      model.backward_stage(a, chunk, in[size_t(mb)].data(), tgt[size_t(mb)].data(), dloss);
  };
  auto weight_pass = [&](int64_t mb) {
    if (split) model.backward_stage_weight(acts[size_t(mb)], chunk, stash[size_t(mb)].data(), mb == 0);
  };
  input_pass(0);
  input_pass(1);
  weight_pass(0);
  input_pass(2);
  weight_pass(1);
  weight_pass(2);
  return std::vector<float>(model.grads().f32(), model.grads().f32() + layout.numel());
}

class SplitBackward : public ::testing::TestWithParam<Case> {};

TEST_P(SplitBackward, GradientsEqualTheCombinedBackwardBitForBit) {
  const std::vector<float> whole = gradients(GetParam(), false), split = gradients(GetParam(), true);
  ASSERT_EQ(whole.size(), split.size());
  int64_t differ = 0, nonzero = 0;
  for (size_t i = 0; i < whole.size(); ++i) {
    differ += std::memcmp(&whole[i], &split[i], 4) != 0;
    nonzero += whole[i] != 0.0f;
  }
  EXPECT_EQ(differ, 0) << GetParam().name << ": of " << whole.size() << " gradients";
  EXPECT_GT(nonzero, int64_t(whole.size() / 2));  // the comparison compares something
}

INSTANTIATE_TEST_SUITE_P(
    Models, SplitBackward,
    ::testing::Values(Case{"gpt_fp32", false, Precision::Fp32, 0.0f},
                      Case{"gpt_fp32_dropout", false, Precision::Fp32, 0.2f},
                      Case{"gpt_bf16_dropout", false, Precision::Bf16, 0.2f},
                      Case{"gpt_fp16", false, Precision::Fp16, 0.0f},
                      Case{"llama_fp32_dropout", true, Precision::Fp32, 0.2f},
                      Case{"llama_bf16", true, Precision::Bf16, 0.0f},
                      // The weight pass recomputes the layer's GEMM inputs again.
                      Case{"gpt_fp32_dropout_selective", false, Precision::Fp32, 0.2f,
                           Recompute::Selective},
                      Case{"gpt_bf16_dropout_full", false, Precision::Bf16, 0.2f, Recompute::Full},
                      Case{"llama_fp32_full", true, Precision::Fp32, 0.0f, Recompute::Full}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(SplitBackward, StashHoldsTheFourGemmOutputGradients) {
  // gpt16: N = 16 rows, C = 16, qkv 48 and fc 64 columns; every view a
  // multiple of 64 bytes, so the size is the views' exactly.
  const GPTConfig m = test::gpt16(1);
  const ParamLayout layout = ParamLayout::build(m, ParallelConfig{}, 0, 0);
  const ActShape fp32 = GPT(m, layout).act_shape(2, m.seq_length);
  EXPECT_EQ(layer_grad_stash_bytes(fp32), 4 * 16 * (48 + 16 + 64 + 16));
  const ActShape bf16 = GPT(m, layout, {.precision = Precision::Bf16}).act_shape(2, m.seq_length);
  EXPECT_EQ(layer_grad_stash_bytes(bf16), 2 * 16 * (48 + 16 + 64 + 16));
  std::vector<char> mem(size_t(layer_grad_stash_bytes(bf16)));
  const LayerGradStash st = layer_grad_stash_place(bf16, mem.data());
  EXPECT_EQ(st.dqkv.p, static_cast<void*>(mem.data()));
  EXPECT_EQ(st.dqkv.dtype, Precision::Bf16);
  EXPECT_EQ(static_cast<char*>(st.dfcproj.p) - mem.data(), 2 * 16 * (48 + 16 + 64));
}

// The weight pass's second recomputation is hardware work: counted twice.
TEST(SplitBackward, HardwareFlopsCountTheWeightPassRecompute) {
  const GPTConfig m = test::gpt16(3);
  for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full}) {
    const FlopCount once = step_flops(m, 8, rc);
    const FlopCount zb = step_flops(m, 8, rc, ScheduleKind::ZeroBubbleH1);
    EXPECT_EQ(zb.model, once.model) << recompute_name(rc);
    EXPECT_DOUBLE_EQ(zb.hardware - zb.model, 2.0 * (once.hardware - once.model))
        << recompute_name(rc);
    EXPECT_EQ(once.hardware > once.model, rc != Recompute::None);
  }
}

}  // namespace
}  // namespace tessera

// The kernels that store activations in 16 bits (--bf16 / --fp16) compute in
// fp32 between a widening load and one rounding store, in the fp32 kernel's
// order. So each equals the fp32 kernel run on the widened 16-bit inputs,
// with its 16-bit outputs rounded once: bit for bit, not to a tolerance.
// And kernels::Ops routes 16-bit views to them, and GEMMs to the 16-bit
// operands without a cast.
#include <gtest/gtest.h>

#include <vector>

#include "kernel_test_util.h"
#include "tessera/kernels/cpu/attention.h"
#include "tessera/kernels/cpu/cast.h"
#include "tessera/kernels/cpu/cpu_backend.h"
#include "tessera/kernels/cpu/cross_entropy.h"
#include "tessera/kernels/cpu/cross_entropy_vocab_parallel.h"
#include "tessera/kernels/cpu/gelu.h"
#include "tessera/kernels/cpu/layernorm.h"
#include "tessera/kernels/cpu/matmul_lowp.h"
#include "tessera/kernels/ops.h"

using namespace tessera;

namespace {

using u16vec = std::vector<uint16_t>;

u16vec to16(const std::vector<float>& x, bool bf16) {
  u16vec out(x.size());
  if (bf16)
    cpu::cast_fp32_to_bf16(out.data(), x.data(), int64_t(x.size()));
  else
    cpu::cast_fp32_to_fp16(out.data(), x.data(), int64_t(x.size()));
  return out;
}
std::vector<float> widen(const u16vec& x, bool bf16) {
  std::vector<float> out(x.size());
  if (bf16)
    cpu::cast_bf16_to_fp32(out.data(), x.data(), int64_t(x.size()));
  else
    cpu::cast_fp16_to_fp32(out.data(), x.data(), int64_t(x.size()));
  return out;
}

class LowpStorage : public ::testing::TestWithParam<bool> {};  // true: bf16, false: fp16

TEST_P(LowpStorage, LayerNormOutputIsTheFp32OutputRounded) {
  const bool bf16 = GetParam();
  constexpr int64_t N = 37, C = 72;
  const auto x = test::randn(N * C, 1, 3.0f), w = test::randn(C, 2), b = test::randn(C, 3);
  std::vector<float> y(N * C), mean(N), rstd(N), mean16(N), rstd16(N);
  cpu::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  u16vec y16(N * C);
  if (bf16)
    cpu::layernorm_forward_bf16(y16.data(), mean16.data(), rstd16.data(), x.data(), w.data(),
                                b.data(), N, C);
  else
    cpu::layernorm_forward_fp16(y16.data(), mean16.data(), rstd16.data(), x.data(), w.data(),
                                b.data(), N, C);
  EXPECT_EQ(y16, to16(y, bf16));
  EXPECT_EQ(mean16, mean);  // fp32 statistics, unchanged
  EXPECT_EQ(rstd16, rstd);
}

TEST_P(LowpStorage, GeluIsTheFp32GeluOfTheWidenedInput) {
  const bool bf16 = GetParam();
  constexpr int64_t n = 40000;  // above the threading threshold
  const u16vec x16 = to16(test::randn(n, 4, 2.0f), bf16);
  const auto x = widen(x16, bf16), dy = test::randn(n, 5);
  std::vector<float> y(n), dx(n);
  cpu::gelu_forward(y.data(), x.data(), n);
  cpu::gelu_backward(dx.data(), x.data(), dy.data(), n);
  u16vec y16(n), dx16(n);  // dx16: the fc GEMM's 16-bit operand, rounded once
  if (bf16) {
    cpu::gelu_forward_bf16(y16.data(), x16.data(), n);
    cpu::gelu_backward_bf16(dx16.data(), x16.data(), dy.data(), n);
  } else {
    cpu::gelu_forward_fp16(y16.data(), x16.data(), n);
    cpu::gelu_backward_fp16(dx16.data(), x16.data(), dy.data(), n);
  }
  EXPECT_EQ(y16, to16(y, bf16));
  EXPECT_EQ(dx16, to16(dx, bf16));
}

// Head size 24 (not a multiple of the 64-wide tiles) and T past one tile,
// with the attention-probability dropout on: the mask is drawn by position,
// the same in both.
TEST_P(LowpStorage, AttentionIsTheFp32AttentionOfTheWidenedInputs) {
  const bool bf16 = GetParam();
  constexpr int64_t B = 2, T = 70, NH = 3, C = 72;
  DropoutSite drop;
  drop.p = 0.1f;
  drop.seed = 9;
  drop.step = 3;
  drop.site = DropoutSiteKind::AttentionProbs;
  const u16vec qkv16 = to16(test::randn(B * T * 3 * C, 6), bf16);
  const auto qkv = widen(qkv16, bf16), dout = test::randn(B * T * C, 7);
  std::vector<float> out(B * T * C), lse(B * NH * T), lse16(B * NH * T);
  u16vec out16(B * T * C);
  cpu::attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH, &drop);
  if (bf16)
    cpu::attention_forward_bf16(out16.data(), lse16.data(), qkv16.data(), B, T, C, NH, &drop);
  else
    cpu::attention_forward_fp16(out16.data(), lse16.data(), qkv16.data(), B, T, C, NH, &drop);
  EXPECT_EQ(out16, to16(out, bf16));
  EXPECT_EQ(lse16, lse);
  // Backward from the stored (16-bit) output, as the model runs it.
  const auto outw = widen(out16, bf16);
  std::vector<float> dqkv(B * T * 3 * C);
  u16vec dqkv16(B * T * 3 * C);  // the qkv GEMM's 16-bit operand, rounded once
  cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), outw.data(), lse.data(), B, T,
                          C, NH, &drop);
  if (bf16)
    cpu::attention_backward_bf16(dqkv16.data(), dout.data(), qkv16.data(), out16.data(),
                                 lse.data(), B, T, C, NH, &drop);
  else
    cpu::attention_backward_fp16(dqkv16.data(), dout.data(), qkv16.data(), out16.data(),
                                 lse.data(), B, T, C, NH, &drop);
  EXPECT_EQ(dqkv16, to16(dqkv, bf16));
}

// The LM head's dlogits are written once in 16 bits (its GEMMs' operand):
// the fp32 gradient rounded, including the target's column (recomputed from
// the logit, not read back) and the zero rows of ignored targets; vocab
// parallel the same on a slice whose target may lie outside it.
TEST_P(LowpStorage, CrossEntropyGradientIsTheRoundedFp32Gradient) {
  const bool bf16 = GetParam();
  constexpr int64_t N = 5, V = 1003;  // V: the vector body and a tail
  const auto logits = test::randn(N * V, 8, 3.0f);
  const std::vector<int32_t> targets = {7, -1, 1002, 0, 500};
  const float dloss = 1.0f / 1024;  // small enough that fp16 has subnormal gradients
  std::vector<float> losses(N), lse(N), d(N * V);
  cpu::cross_entropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V);
  cpu::cross_entropy_backward(d.data(), logits.data(), lse.data(), targets.data(), dloss, N, V);
  u16vec d16(N * V);
  if (bf16)
    cpu::cross_entropy_backward_bf16(d16.data(), logits.data(), lse.data(), targets.data(), dloss,
                                     N, V);
  else
    cpu::cross_entropy_backward_fp16(d16.data(), logits.data(), lse.data(), targets.data(), dloss,
                                     N, V);
  EXPECT_EQ(d16, to16(d, bf16));

  // Vocab parallel: the slice [400, 900) of the same rows (targets 7, 1002
  // and 0 are outside it, 500 inside).
  constexpr int64_t begin = 400, Vs = 500;
  std::vector<float> slice(N * Vs), ds(N * Vs);
  for (int64_t n = 0; n < N; n++)
    std::copy_n(logits.data() + n * V + begin, Vs, slice.data() + n * Vs);
  cpu::vp_xent_backward(ds.data(), slice.data(), lse.data(), targets.data(), dloss, N, Vs, begin);
  u16vec ds16(N * Vs);
  if (bf16)
    cpu::vp_xent_backward_bf16(ds16.data(), slice.data(), lse.data(), targets.data(), dloss, N,
                               Vs, begin);
  else
    cpu::vp_xent_backward_fp16(ds16.data(), slice.data(), lse.data(), targets.data(), dloss, N,
                               Vs, begin);
  EXPECT_EQ(ds16, to16(ds, bf16));
}

INSTANTIATE_TEST_SUITE_P(Bf16AndFp16, LowpStorage, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "bf16" : "fp16"; });

// Ops with 16-bit views: a GEMM reads a 16-bit input as it is (no cast),
// writes a 16-bit output through the _out GEMM, and the other kernels pick
// their 16-bit forms.
TEST(KernelOpsLowpStorage, SixteenBitViewsNeedNoCast) {
  constexpr int64_t N = 32, C = 48, OC = 40;
  const auto x = test::randn(N * C, 1), w = test::randn(OC * C, 2), b = test::randn(OC, 3);
  const u16vec xb = to16(x, true), wb = to16(w, true);
  kernels::LowPrecision lp;
  lp.precision = Precision::Bf16;
  lp.bind(w.data(), int64_t(w.size()), wb.data());
  Profile prof;
  const kernels::Ops ops(kernels::cpu_backend(), &prof, &lp);
  u16vec got(N * OC), want(N * OC);
  ops.matmul_forward(kernels::Act(got.data(), Precision::Bf16),
                     kernels::ConstAct(xb.data(), Precision::Bf16), w.data(), b.data(), N, C, OC);
  cpu::matmul_forward_bf16_out(want.data(), xb.data(), wb.data(), b.data(), N, C, OC);
  EXPECT_EQ(got, want);
  EXPECT_EQ(prof[Op::Cast], 0.0);  // nothing cast: input and weight were 16-bit already
  EXPECT_GT(prof[Op::Gemm], 0.0);
  // A layernorm into a 16-bit view is the bf16 kernel.
  std::vector<float> mean(N), rstd(N), y(N * C);
  u16vec y16(N * C);
  const auto g = test::randn(C, 4), beta = test::randn(C, 5);
  ops.layernorm_forward(kernels::Act(y16.data(), Precision::Bf16), mean.data(), rstd.data(), x.data(),
                        g.data(), beta.data(), N, C);
  cpu::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), g.data(), beta.data(), N,
                         C);
  EXPECT_EQ(y16, to16(y, true));
}

TEST(KernelOpsLowpStorage, SixteenBitViewWithoutLowPrecisionStateIsRefused) {
  const kernels::Ops ops(kernels::cpu_backend(), nullptr);  // fp32
  u16vec y16(4 * 8);
  std::vector<float> x(4 * 8, 1.0f), g(8, 1.0f), b(8, 0.0f), mean(4), rstd(4);
  EXPECT_THROW(ops.layernorm_forward(kernels::Act(y16.data(), Precision::Bf16), mean.data(), rstd.data(),
                                     x.data(), g.data(), b.data(), 4, 8),
               Error);
}

}  // namespace

// Context parallelism across ranks (model/context_parallel.h): the world
// is one cp group, each rank holding its load-balanced T / cp rows of every
// sequence. The ring (p2p: K/V blocks passed around with send/recv, dK/dV
// travelling back to their owners) and the all-gather variant must give,
// at each rank's global positions, the single-process causal attention's
// out, lse and dqkv: GPT-2's heads, GQA with RoPE, probability dropout, and
// 16-bit activations (widened at the seam). The trainer's CP runs are in
// mpi_test_trainer_cp.cpp.
#include <gtest/gtest.h>

#include <vector>

#include "../kernels/kernel_test_util.h"
#include "mpi_test_env.h"
#include "ring_attention_case.h"
#include "tessera/kernels/cpu_backend_info.h"
#include "tessera/kernels/ops.h"
#include "tessera/model/context_parallel.h"

namespace tessera {
namespace {

using test::world;

using Case = test::RingAttentionCase;
using test::site_of;

// rows (B, Tl, width) = rows pos[t] of x (B, T, width).
std::vector<float> rows_at(const std::vector<float>& x, int64_t B, int64_t T, int64_t width,
                           const std::vector<int64_t>& pos) {
  const int64_t Tl = int64_t(pos.size());
  std::vector<float> r(size_t(B * Tl * width));
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < Tl; t++)
      std::copy_n(&x[size_t((b * T + pos[size_t(t)]) * width)], width,
                  &r[size_t((b * Tl + t) * width)]);
  return r;
}

// lse (B, NH, Tl) = columns pos of lse (B, NH, T).
std::vector<float> lse_at(const std::vector<float>& lse, int64_t B, int64_t NH, int64_t T,
                          const std::vector<int64_t>& pos) {
  const int64_t Tl = int64_t(pos.size());
  std::vector<float> r(size_t(B * NH * Tl));
  for (int64_t bh = 0; bh < B * NH; bh++)
    for (int64_t t = 0; t < Tl; t++) r[size_t(bh * Tl + t)] = lse[size_t(bh * T + pos[size_t(t)])];
  return r;
}

class CpAttention : public ::testing::TestWithParam<Case> {};

TEST_P(CpAttention, RingEqualsFullAttention) {
  if (world().size() == 1) GTEST_SKIP() << "one rank: no ring";
  const Case c = GetParam();
  const AttentionHeads hd = c.heads();
  const int64_t B = c.B, T = c.T, W = hd.qkv_width(), C = hd.q_width();
  // Every rank draws the same whole-sequence tensors and computes the
  // single-process reference itself.
  const auto qkv = test::randn(B * T * W, 1, 1.0f);
  const auto dout = test::randn(B * T * C, 2, 1.0f);
  const DropoutSite site = site_of(c);
  const DropoutSite* drop = c.drop_p > 0 ? &site : nullptr;
  const kernels::Ops ops(kernels::cpu_backend(), nullptr);
  std::vector<float> out(size_t(B * T * C)), lse(size_t(B * c.NH * T)), dqkv(qkv.size());
  ops.attention_forward(out.data(), lse.data(), qkv.data(), B, T, hd, drop);
  ops.attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, hd,
                         drop);

  const ContextParallel cp(&world(), T, c.all_gather);
  const std::vector<int64_t>& pos = cp.positions();
  const int64_t Tl = cp.local_T();
  ASSERT_EQ(int64_t(pos.size()), T / world().size());
  const auto q_l = rows_at(qkv, B, T, W, pos);
  const auto dout_l = rows_at(dout, B, T, C, pos);
  std::vector<float> out_l(size_t(B * Tl * C)), lse_l(size_t(B * c.NH * Tl)), dqkv_l(q_l.size());
  cp.attention_forward(ops, out_l.data(), lse_l.data(), q_l.data(), B, hd, drop);
  cp.attention_backward(ops, dqkv_l.data(), dout_l.data(), q_l.data(), out_l.data(),
                        lse_l.data(), B, hd, drop);
  EXPECT_LT(test::max_err_vs_scale(out_l, rows_at(out, B, T, C, pos)), 1e-5);
  EXPECT_LT(test::max_err_vs_scale(lse_l, lse_at(lse, B, c.NH, T, pos)), 1e-5);
  EXPECT_LT(test::max_err_vs_scale(dqkv_l, rows_at(dqkv, B, T, W, pos)), 1e-5);
  // The comparison can fail: a rank's rows are not the sequence's first Tl.
  if (world().rank() > 0) {
    std::vector<int64_t> first(static_cast<size_t>(Tl));
    for (int64_t t = 0; t < Tl; t++) first[size_t(t)] = t;
    EXPECT_GT(test::max_err_vs_scale(out_l, rows_at(out, B, T, C, first)), 1e-2);
  }
}

// bf16 activations: the ring widens qkv, merges in fp32 and rounds out and
// dqkv once, so it agrees with the fp32 ring on the widened qkv to bf16's
// rounding of the results.
TEST_P(CpAttention, Bf16ActivationsWidenAtTheSeam) {
  if (world().size() == 1) GTEST_SKIP() << "one rank: no ring";
  const Case c = GetParam();
  const AttentionHeads hd = c.heads();
  const int64_t B = c.B, T = c.T, W = hd.qkv_width(), C = hd.q_width();
  const ContextParallel cp(&world(), T, c.all_gather);
  const int64_t Tl = cp.local_T();
  const DropoutSite site = site_of(c);
  const DropoutSite* drop = c.drop_p > 0 ? &site : nullptr;
  const kernels::Ops ops(kernels::cpu_backend(), nullptr);
  const auto q32 = test::randn(B * Tl * W, 3 + uint64_t(world().rank()), 1.0f);
  const auto dout = test::randn(B * Tl * C, 7 + uint64_t(world().rank()), 1.0f);
  std::vector<uint16_t> q16(q32.size()), out16(size_t(B * Tl * C)), dqkv16(q32.size());
  ops.cast(kernels::Act(q16.data(), Precision::Bf16), q32.data(), int64_t(q32.size()));
  std::vector<float> qw(q32.size());  // the bf16 values, widened: the fp32 ring's input
  ops.cast(kernels::Act(qw.data()), kernels::ConstAct(q16.data(), Precision::Bf16),
           int64_t(qw.size()));
  std::vector<float> out(out16.size()), lse(size_t(B * c.NH * Tl)), lse16(lse.size());
  std::vector<float> dqkv(q32.size());
  cp.attention_forward(ops, out.data(), lse.data(), qw.data(), B, hd, drop);
  cp.attention_backward(ops, dqkv.data(), dout.data(), qw.data(), out.data(), lse.data(), B, hd,
                        drop);
  cp.attention_forward(ops, kernels::Act(out16.data(), Precision::Bf16), lse16.data(),
                       kernels::ConstAct(q16.data(), Precision::Bf16), B, hd, drop);
  cp.attention_backward(ops, kernels::Act(dqkv16.data(), Precision::Bf16), dout.data(),
                        kernels::ConstAct(q16.data(), Precision::Bf16),
                        kernels::ConstAct(out16.data(), Precision::Bf16), lse16.data(), B, hd,
                        drop);
  std::vector<float> got(out.size()), gotd(dqkv.size());
  ops.cast(kernels::Act(got.data()), kernels::ConstAct(out16.data(), Precision::Bf16),
           int64_t(got.size()));
  ops.cast(kernels::Act(gotd.data()), kernels::ConstAct(dqkv16.data(), Precision::Bf16),
           int64_t(gotd.size()));
  EXPECT_EQ(lse16, lse);  // the same fp32 merge
  EXPECT_LT(test::max_err_vs_scale(got, out), 1e-2);
  // backward reads the rounded out (D = rowsum(dout * out)): a little more
  EXPECT_LT(test::max_err_vs_scale(gotd, dqkv), 2e-2);
}

INSTANTIATE_TEST_SUITE_P(
    Heads, CpAttention,
    ::testing::Values(Case{2, 64, 4, 4, 16, 0.0f, 0.0f, false},      // GPT-2's heads
                      Case{2, 64, 4, 2, 16, 10000.0f, 0.0f, false},  // GQA with RoPE
                      Case{2, 64, 4, 4, 16, 0.0f, 0.1f, false},      // probability dropout
                      Case{1, 96, 6, 2, 16, 10000.0f, 0.2f, false},  // all three, one sequence
                      Case{2, 64, 4, 2, 16, 10000.0f, 0.1f, true})); // all_gather

}  // namespace
}  // namespace tessera

// The MoE kernels (backend_methods.inc: moe_route_*, moe_permute_*,
// moe_combine_*, moe_shared_gate_*, grouped_matmul_*) on the CPU backend, by what they must
// guarantee beyond the PyTorch check of the whole layer (test_torch_moe):
// ties go to the lowest expert index, drops follow token order, and each
// expert's group of the grouped GEMM is the dense GEMM's bits.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"
#include "tessera/kernels/cpu_backend_info.h"
#include "tessera/kernels/moe_stats.h"

using namespace tessera;
using kernels::kMoeDropped;
using kernels::kMoeStats;

namespace {

const kernels::Backend& cpu() { return kernels::cpu_backend(); }

struct Routing {
  std::vector<int32_t> idx, slot, counts;
  std::vector<float> gates, stats;
};

Routing route(const std::vector<float>& logits, int64_t N, int64_t E, int64_t K,
              int64_t capacity, bool pre_softmax = false) {
  Routing r{std::vector<int32_t>(N * K), std::vector<int32_t>(N * K), std::vector<int32_t>(E),
            std::vector<float>(N * K), std::vector<float>(kMoeStats + E)};
  cpu().moe_route_forward(r.idx.data(), r.gates.data(), r.slot.data(), r.counts.data(),
                          r.stats.data(), logits.data(), N, E, K, capacity, /*aux_group=*/N,
                          pre_softmax);
  return r;
}

TEST(MoeRoute, PreSoftmaxGatesAreTheFullSoftmaxTopKNotRenormalised) {
  // One token, E 4, top-2: the same experts as the default, gates p[idx].
  const std::vector<float> logits = {0.3f, 1.2f, -0.5f, 0.9f};
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l));
  const Routing pre = route(logits, 1, 4, 2, 1, /*pre_softmax=*/true);
  const Routing renorm = route(logits, 1, 4, 2, 1);
  EXPECT_EQ(pre.idx, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(pre.idx, renorm.idx);
  EXPECT_NEAR(pre.gates[0], std::exp(1.2) / sum, 1e-7);
  EXPECT_NEAR(pre.gates[1], std::exp(0.9) / sum, 1e-7);
  EXPECT_NEAR(renorm.gates[0] + renorm.gates[1], 1.0, 1e-6);
  EXPECT_LT(pre.gates[0] + pre.gates[1], 0.9f);
}

TEST(MoeRoute, PreSoftmaxBackwardMatchesFiniteDifferences) {
  // L = sum_k w_k gate_k (+ the aux loss at 0.3): dlogits against central
  // differences of the forward in double steps of fp32 logits.
  const int64_t N = 2, E = 5, K = 2;
  const std::vector<float> logits = {0.3f, 1.2f, -0.5f, 0.9f, 0.1f,  //
                                     -1.0f, 0.4f, 0.8f, 0.2f, 1.5f};
  const std::vector<float> w = {0.7f, -1.3f, 2.1f, 0.4f};  // dL / d gates (N, K)
  const float aux_scale = 0.3f;
  auto loss = [&](const std::vector<float>& l) {
    const Routing r = route(l, N, E, K, N, true);
    double s = aux_scale * double(r.stats[kernels::kMoeAuxLoss]);
    for (int64_t i = 0; i < N * K; ++i) s += double(w[size_t(i)]) * double(r.gates[size_t(i)]);
    return s;
  };
  const Routing r = route(logits, N, E, K, N, true);
  std::vector<float> dl(size_t(N * E));
  cpu().moe_route_backward(dl.data(), w.data(), logits.data(), r.idx.data(), r.gates.data(), N, E,
                           K, /*aux_group=*/N, aux_scale, /*z_scale=*/0.0f, /*pre_softmax=*/true);
  for (int64_t i = 0; i < N * E; ++i) {
    const float h = 1e-2f;
    std::vector<float> up = logits, down = logits;
    up[size_t(i)] += h;
    down[size_t(i)] -= h;
    const double fd = (loss(up) - loss(down)) / (2.0 * double(h));
    EXPECT_NEAR(dl[size_t(i)], fd, 2e-4) << "logit " << i;
  }
}

TEST(MoeRoute, TiesGoToTheLowestExpertIndex) {
  // Token 0: all equal; token 1: experts 1 and 3 tie for first, 0 and 2 for third.
  const std::vector<float> logits = {0.5f, 0.5f, 0.5f, 0.5f,  //
                                     0.0f, 2.0f, 0.0f, 2.0f};
  const Routing r = route(logits, 2, 4, 3, 2);
  EXPECT_EQ(r.idx, (std::vector<int32_t>{0, 1, 2, 1, 3, 0}));
  // Equal logits, equal gates: the softmax of the chosen three.
  for (int k = 0; k < 3; ++k) EXPECT_FLOAT_EQ(r.gates[k], 1.0f / 3.0f);
}

TEST(MoeRoute, CapacityKeepsTheFirstTokensInOrderAndSortsRowsByExpert) {
  // Four tokens, all preferring expert 1 then expert 0; capacity 2 each.
  std::vector<float> logits;
  for (int n = 0; n < 4; ++n) logits.insert(logits.end(), {1.0f, 2.0f, 0.0f});
  const Routing r = route(logits, 4, 3, 2, 2);
  // Expert 0's rows come first (slots 0-1), then expert 1's (2-3); tokens 2
  // and 3 find both full.
  EXPECT_EQ(r.slot, (std::vector<int32_t>{2, 0, 3, 1, -1, -1, -1, -1}));
  EXPECT_EQ(r.counts, (std::vector<int32_t>{2, 2, 0}));
  EXPECT_EQ(r.stats[kMoeDropped], 4.0f);
  EXPECT_EQ(r.stats[kMoeStats + 0], 4.0f);  // choices before the drop
  EXPECT_EQ(r.stats[kMoeStats + 1], 4.0f);
  EXPECT_EQ(r.stats[kMoeStats + 2], 0.0f);
}

TEST(GroupedMatmul, EachGroupIsTheDenseGemmBitForBit) {
  const int64_t E = 3, C = 24, OC = 40;
  const std::vector<int32_t> counts = {5, 0, 9};  // an expert without rows
  const int64_t R = 16;                           // one spare row, never touched
  const auto inp = test::randn(R * C, 1, 1.0f);
  const auto w = test::randn(E * OC * C, 2, 0.5f);
  const auto b = test::randn(E * OC, 3, 0.1f);
  std::vector<float> out(R * OC, 7.0f);
  cpu().grouped_matmul_forward(out.data(), inp.data(), w.data(), b.data(), counts.data(), R, E, C,
                               OC);
  int64_t row = 0;
  for (int64_t e = 0; e < E; ++e) {
    if (counts[e] == 0) continue;
    std::vector<float> dense(counts[e] * OC);
    cpu().matmul_forward(dense.data(), inp.data() + row * C, w.data() + e * OC * C,
                         b.data() + e * OC, counts[e], C, OC);
    for (int64_t i = 0; i < counts[e] * OC; ++i) ASSERT_EQ(out[row * OC + i], dense[i]) << e;
    row += counts[e];
  }
  for (int64_t i = row * OC; i < R * OC; ++i) ASSERT_EQ(out[i], 7.0f);

  // Backward: expert 1 (no rows) keeps its zero gradient; the others are
  // the dense backward's.
  const auto dout = test::randn(R * OC, 4, 1.0f);
  std::vector<float> dinp(R * C), dw(E * OC * C, 0.0f), db(E * OC, 0.0f);
  cpu().grouped_matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(),
                                w.data(), counts.data(), R, E, C, OC, false);
  row = 0;
  for (int64_t e = 0; e < E; ++e) {
    std::vector<float> ddense(counts[e] * C), dwe(OC * C, 0.0f), dbe(OC, 0.0f);
    if (counts[e] > 0)
      cpu().matmul_backward(ddense.data(), dwe.data(), dbe.data(), dout.data() + row * OC,
                            inp.data() + row * C, w.data() + e * OC * C, counts[e], C, OC, false,
                            false);
    for (int64_t i = 0; i < counts[e] * C; ++i) ASSERT_EQ(dinp[row * C + i], ddense[i]);
    for (int64_t i = 0; i < OC * C; ++i) ASSERT_EQ(dw[e * OC * C + i], dwe[i]) << e;
    for (int64_t i = 0; i < OC; ++i) ASSERT_EQ(db[e * OC + i], dbe[i]) << e;
    row += counts[e];
  }
}

TEST(MoePermuteCombine, RowsGoToTheirSlotsAndComeBackWeighted) {
  const int64_t N = 3, K = 2, C = 4;
  const std::vector<int32_t> slot = {1, -1, 0, 2, 3, 4};  // token 0's second choice dropped
  const std::vector<float> gates = {0.75f, 0.25f, 0.5f, 0.5f, 0.9f, 0.1f};
  const auto x = test::randn(N * C, 5, 1.0f);
  std::vector<float> xs(5 * C, 0.0f);
  cpu().moe_permute_forward(xs.data(), x.data(), slot.data(), N, K, C);
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_EQ(xs[1 * C + c], x[0 * C + c]);
    EXPECT_EQ(xs[0 * C + c], x[1 * C + c]);
    EXPECT_EQ(xs[4 * C + c], x[2 * C + c]);
  }
  std::vector<float> out(N * C);
  cpu().moe_combine_forward(out.data(), xs.data(), gates.data(), slot.data(), N, K, C);
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_FLOAT_EQ(out[c], 0.75f * x[c]);  // the dropped choice adds nothing
    EXPECT_FLOAT_EQ(out[2 * C + c], 0.9f * xs[3 * C + c] + 0.1f * x[2 * C + c]);
  }
}

// The shared expert's gate (Qwen2-MoE): out += sigmoid(logit) * y per
// token, and backward's dy = gate * dout and dlogit = g (1 - g) dout . y;
// a logit written in place of the gate is read before it is overwritten.
TEST(MoeSharedGate, SigmoidScalesEachTokenAndItsGradient) {
  const int64_t N = 3, C = 4;
  const auto y = test::randn(N * C, 7, 1.0f);
  const auto dout = test::randn(N * C, 8, 1.0f);
  std::vector<float> gate = {0.0f, 2.0f, -1.0f};  // the logits, overwritten by the gates
  const std::vector<float> logit = gate;
  std::vector<float> out(N * C, 1.0f);
  cpu().moe_shared_gate_forward(out.data(), gate.data(), gate.data(), y.data(), N, C);
  std::vector<float> dy(N * C), dlogit(N);
  cpu().moe_shared_gate_backward(dy.data(), dlogit.data(), dout.data(), y.data(), gate.data(), N,
                                 C);
  for (int64_t n = 0; n < N; ++n) {
    const double g = 1.0 / (1.0 + std::exp(-double(logit[n])));
    EXPECT_NEAR(gate[n], g, 1e-7);
    double dot = 0;
    for (int64_t c = 0; c < C; ++c) {
      EXPECT_FLOAT_EQ(out[n * C + c], 1.0f + gate[n] * y[n * C + c]);
      EXPECT_FLOAT_EQ(dy[n * C + c], gate[n] * dout[n * C + c]);
      dot += double(dout[n * C + c]) * double(y[n * C + c]);
    }
    EXPECT_NEAR(dlogit[n], g * (1 - g) * dot, 1e-6 * (1 + std::abs(dot)));
  }
}

}  // namespace

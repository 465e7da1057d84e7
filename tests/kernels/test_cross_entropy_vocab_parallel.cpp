// Vocab-parallel cross-entropy: the logits cut into column slices (one of
// them empty, as a slice of padding only is), the row statistics combined as
// the tp all-reduces would, must give the one-slice kernel's losses and
// gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernel_test_util.h"
#include "tessera/kernels/cpu/cross_entropy.h"
#include "tessera/kernels/cpu/cross_entropy_vocab_parallel.h"

using namespace tessera;

TEST(CrossEntropyVocabParallel, SlicesCombineToTheFullSoftmax) {
  const int64_t N = 5, V = 50;
  const std::vector<int64_t> cuts = {0, 16, 32, 50, 50};  // 4 slices, the last empty
  auto logits = test::randn(N * V, 7, 2.0f);
  for (int64_t v = 0; v < V; v++) logits[V + v] += 500.0f;  // needs the global max
  const std::vector<int32_t> targets = {3, 20, -1, 49, 0};
  std::vector<float> want_loss(N), want_lse(N), want_d(N * V);
  cpu::cross_entropy_forward(want_loss.data(), want_lse.data(), logits.data(), targets.data(), N,
                             V);
  cpu::cross_entropy_backward(want_d.data(), logits.data(), want_lse.data(), targets.data(),
                              0.25f, N, V);

  const size_t S = cuts.size() - 1;
  std::vector<std::vector<float>> slice(S);  // (N, Vs) each
  for (size_t s = 0; s < S; ++s) {
    const int64_t Vs = cuts[s + 1] - cuts[s];
    for (int64_t n = 0; n < N; ++n)
      for (int64_t v = 0; v < Vs; ++v) slice[s].push_back(logits[n * V + cuts[s] + v]);
  }
  // all-reduce(max), then all-reduce(sum) of (sum-exp, target logit).
  std::vector<float> row_max(N, -INFINITY), sums(2 * N, 0.0f);
  for (size_t s = 0; s < S; ++s) {
    std::vector<float> m(N);
    cpu::vp_xent_local_max(m.data(), slice[s].data(), N, cuts[s + 1] - cuts[s]);
    for (int64_t n = 0; n < N; ++n) row_max[n] = std::max(row_max[n], m[n]);
  }
  for (size_t s = 0; s < S; ++s) {
    std::vector<float> part(2 * N);
    cpu::vp_xent_local_sums(part.data(), slice[s].data(), row_max.data(), targets.data(), N,
                            cuts[s + 1] - cuts[s], cuts[s]);
    for (int64_t i = 0; i < 2 * N; ++i) sums[i] += part[i];
  }
  std::vector<float> loss(N), lse(N);
  cpu::vp_xent_finish(loss.data(), lse.data(), row_max.data(), sums.data(), targets.data(), N);
  EXPECT_LT(test::max_rel_err(loss, want_loss, 1e-6), 1e-5);
  EXPECT_LT(test::max_rel_err(lse, want_lse, 1e-6), 1e-6);
  EXPECT_EQ(loss[2], 0.0f);  // ignored target

  for (size_t s = 0; s < S; ++s) {
    const int64_t Vs = cuts[s + 1] - cuts[s];
    cpu::vp_xent_backward(slice[s].data(), slice[s].data(), lse.data(), targets.data(), 0.25f, N,
                          Vs, cuts[s]);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t v = 0; v < Vs; ++v)
        EXPECT_NEAR(slice[s][n * Vs + v], want_d[n * V + cuts[s] + v], 1e-6) << n << " " << v;
  }
}

// Softmax cross-entropy against a double reference and central differences.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"
#include "tessera/core/error.h"
#include "tessera/kernels/cpu/cross_entropy.h"

using namespace tessera;

namespace {

// log-sum-exp of one row in double.
double ref_lse(const double* x, int64_t V) {
  double m = -INFINITY, s = 0;
  for (int64_t v = 0; v < V; v++) m = std::max(m, x[v]);
  for (int64_t v = 0; v < V; v++) s += std::exp(x[v] - m);
  return m + std::log(s);
}

TEST(CrossEntropy, ForwardMatchesReferenceAndIgnoresNegativeTargets) {
  const int64_t N = 6, V = 50;  // V not a multiple of 16
  auto logits = test::randn(N * V, 1, 2.0f);
  for (int64_t v = 0; v < V; v++) logits[2 * V + v] += 1000.0f;  // exp would overflow without max
  const std::vector<int32_t> targets = {3, -1, 49, 0, -100, 17};
  std::vector<float> losses(N, NAN), lse(N, NAN);
  cpu::cross_entropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V);
  const auto x = test::to_double(logits);
  for (int64_t n = 0; n < N; n++) {
    const double l = ref_lse(&x[n * V], V);
    EXPECT_NEAR(lse[n], l, 1e-6 * (1 + std::abs(l))) << n;
    const double want = targets[n] < 0 ? 0.0 : l - x[n * V + targets[n]];
    EXPECT_NEAR(losses[n], want, 1e-5) << n;
  }
  EXPECT_EQ(losses[1], 0.0f);
  EXPECT_EQ(losses[4], 0.0f);
}

TEST(CrossEntropy, TargetOutsideVocabularyIsAnError) {
  const int64_t V = 8;
  const auto logits = test::randn(V, 2);
  const int32_t target = 8;  // padded column, never a real class
  float loss, lse;
  EXPECT_THROW(cpu::cross_entropy_forward(&loss, &lse, logits.data(), &target, 1, V), Error);
}

// dlogits for L = dloss * sum(losses) against central differences of the
// double reference, computed in place (dlogits aliases logits).
TEST(CrossEntropy, BackwardMatchesFiniteDifferences) {
  const int64_t N = 4, V = 37;
  const auto logits = test::randn(N * V, 3, 1.5f);
  const std::vector<int32_t> targets = {5, -1, 36, 0};
  const float dloss = 0.25f;
  std::vector<float> losses(N), lse(N);
  cpu::cross_entropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V);
  std::vector<float> d = logits;
  cpu::cross_entropy_backward(d.data(), d.data(), lse.data(), targets.data(), dloss, N, V);

  auto x = test::to_double(logits);
  auto loss = [&] {
    double l = 0;
    for (int64_t n = 0; n < N; n++)
      if (targets[n] >= 0) l += ref_lse(&x[n * V], V) - x[n * V + targets[n]];
    return double(dloss) * l;
  };
  std::vector<double> numeric(x.size());
  for (size_t i = 0; i < x.size(); i++) {
    const double v = x[i], eps = 1e-6;
    x[i] = v + eps;
    const double lp = loss();
    x[i] = v - eps;
    const double lm = loss();
    x[i] = v;
    numeric[i] = (lp - lm) / (2 * eps);
  }
  EXPECT_LT(test::max_err_vs_scale(d, numeric), 1e-5);
  for (int64_t v = 0; v < V; v++) EXPECT_EQ(d[1 * V + v], 0.0f);  // ignored row
  // Each row's gradient sums to zero (softmax minus one-hot).
  double s = 0;
  for (int64_t v = 0; v < V; v++) s += d[v];
  EXPECT_NEAR(s, 0.0, 1e-6);
}

}  // namespace

// AdamW against a double re-statement of torch.optim.AdamW (1.13).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"
#include "tessera/kernels/cpu/adamw.h"

using namespace tessera;

namespace {

struct State {
  std::vector<double> p, m, v;
};

// PyTorch's order: p *= 1 - lr*wd; m, v updated; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps).
void ref_step(State& s, const std::vector<float>& grads, const cpu::AdamWArgs& a) {
  const double bc1 = 1 - std::pow(double(a.beta1), double(a.step));
  const double bc2 = 1 - std::pow(double(a.beta2), double(a.step));
  for (size_t i = 0; i < s.p.size(); i++) {
    const double g = double(grads[i]) * a.grad_scale;
    s.p[i] *= 1 - double(a.lr) * a.weight_decay;
    s.m[i] = s.m[i] * a.beta1 + (1 - double(a.beta1)) * g;
    s.v[i] = s.v[i] * a.beta2 + (1 - double(a.beta2)) * g * g;
    s.p[i] -= double(a.lr) / bc1 * s.m[i] / (std::sqrt(s.v[i]) / std::sqrt(bc2) + a.eps);
  }
}

// Several steps with decay and a grad scale, on sizes that take the scalar
// tail, the vector body and the threaded path.
TEST(AdamW, MatchesPyTorchFormulaOverSteps) {
  for (int64_t n : {int64_t(7), int64_t(100003)}) {
    std::vector<float> p = test::randn(n, 1), m(n, 0.0f), v(n, 0.0f);
    State ref{test::to_double(p), std::vector<double>(n), std::vector<double>(n)};
    cpu::AdamWArgs a;
    a.lr = 1e-2f, a.weight_decay = 0.1f, a.grad_scale = 0.5f;
    for (int64_t step = 1; step <= 5; step++) {
      a.step = step;
      std::vector<float> g = test::randn(n, 10 + step, 3.0f);
      ref_step(ref, g, a);
      cpu::adamw_update(p.data(), g.data(), m.data(), v.data(), n, a);
      for (int64_t i = 0; i < n; i++) ASSERT_EQ(g[i], 0.0f) << "grad not zeroed at " << i;
    }
    // m and p pass near zero (cancellation), so they are measured against the
    // tensor's scale; v is a sum of squares and is checked elementwise.
    EXPECT_LT(test::max_err_vs_scale(p, ref.p), 1e-6) << n;
    EXPECT_LT(test::max_err_vs_scale(m, ref.m), 1e-6) << n;
    EXPECT_LT(test::max_rel_err(v, ref.v, 1e-12), 1e-6) << n;
  }
}

// Step 1 by hand: mhat = g, vhat = g^2, so p' = p (1 - lr wd) - lr g / (|g| + eps).
// Distinguishes decoupled decay from L2-in-the-gradient and checks grad_scale.
TEST(AdamW, FirstStepByHand) {
  std::vector<float> p = {1.0f, -2.0f, 0.5f}, g = {4.0f, -0.5f, 0.0f}, m(3, 0.0f), v(3, 0.0f);
  cpu::AdamWArgs a;
  a.lr = 0.1f, a.weight_decay = 0.5f, a.grad_scale = 2.0f, a.eps = 1e-8f, a.step = 1;
  cpu::adamw_update(p.data(), g.data(), m.data(), v.data(), 3, a);
  EXPECT_NEAR(p[0], 1.0 * 0.95 - 0.1, 1e-6);
  EXPECT_NEAR(p[1], -2.0 * 0.95 + 0.1, 1e-6);
  EXPECT_NEAR(p[2], 0.5 * 0.95, 1e-6);  // zero grad: decay only
  EXPECT_NEAR(m[0], 0.1 * 8.0, 1e-6);
  EXPECT_NEAR(v[0], 0.05 * 64.0, 1e-5);
}

}  // namespace

// AdamW against a double re-statement of torch.optim.AdamW (1.13).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernel_test_util.h"
#include "tessera/kernels/cpu/adamw.h"
#include "tessera/kernels/cpu/cast.h"

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

// The working copy written from the vector registers (AVX-512 body) and by
// the scalar tail must be the bits the scalar casts give, on the patterns
// where a vector conversion could differ: ties to even, denormals (which
// VCVTNEPS2BF16 would flush), NaN, infinities and values that round up to
// inf. lr = 0 and zero gradients leave the finite parameters as they are.
TEST(AdamW, WorkingCopyHasTheScalarCastsBits) {
  const std::vector<uint32_t> patterns = {
      0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x00000001u, 0x8000ffffu, 0x00018000u,
      0x7f800001u, 0xff800000u, 0x7f7fffffu, 0x477ff000u, 0x33800000u, 0x38800000u,
      0x80000000u, 0x3eaaaaabu, 0xc0490fdbu, 0x7fc00000u, 0x387fc000u};
  const int64_t n = 16 * 9 + 5;  // the vector body and a scalar tail
  for (const Precision type : {Precision::Bf16, Precision::Fp16}) {
    std::vector<float> p(n), g(n, 0.0f), m(n, 0.0f), v(n, 0.0f);
    for (int64_t i = 0; i < n; i++)
      p[i] = std::bit_cast<float>(patterns[size_t(i) % patterns.size()]);
    const std::vector<float> before = p;
    std::vector<uint16_t> working(n, 0xdead);
    cpu::AdamWArgs a;
    a.lr = 0.0f;
    cpu::adamw_update(p.data(), g.data(), m.data(), v.data(), n, a, working.data(), type);
    for (int64_t i = 0; i < n; i++) {
      const uint32_t bits = std::bit_cast<uint32_t>(p[i]);
      if (!std::isnan(before[i])) ASSERT_EQ(bits, std::bit_cast<uint32_t>(before[i])) << i;
      const uint16_t want = type == Precision::Bf16 ? fp32_to_bf16(p[i]) : cpu::fp32_to_fp16(p[i]);
      EXPECT_EQ(working[i], want) << dtype_name(type) << " element " << i << " bits " << std::hex << bits;
    }
  }
}

// The working copy's non-temporal stores need 32-byte aligned addresses, so
// the pass sends the elements before the first one through the scalar form
// (how many depends on where the range starts). That is safe only because
// the scalar form and the vector body give the same bits: a range at every
// start offset of a 32-byte line, threaded (n > 2^15), against each element
// updated alone (n = 1: scalar only), in every output.
TEST(AdamW, EveryStartOffsetGivesTheElementwiseBits) {
  const int64_t n = (1 << 16) + 37;
  for (const Precision type : {Precision::Bf16, Precision::Fp16}) {
    for (int64_t off = 0; off < 16; off += 5) {
      std::vector<float> p = test::randn(n, 1), g = test::randn(n, 2, 0.01f),
                         m = test::randn(n, 3, 0.001f), v = test::randn(n, 4, 1e-3f);  // (n) each
      for (float& x : v) x *= x;  // a second moment is >= 0
      std::vector<float> p1 = p, g1 = g, m1 = m, v1 = v;
      std::vector<uint16_t> w(size_t(n + 16), 0xdead), w1(size_t(n + 16), 0xbeef);  // (n + 16)
      cpu::AdamWArgs a;
      a.lr = 3e-4f, a.weight_decay = 0.1f, a.grad_scale = 0.7f, a.step = 5;
      cpu::adamw_update(p.data(), g.data(), m.data(), v.data(), n, a, w.data() + off, type);
      for (int64_t i = 0; i < n; i++)
        cpu::adamw_update(&p1[i], &g1[i], &m1[i], &v1[i], 1, a, &w1[size_t(off + i)], type);
      for (int64_t i = 0; i < n; i++) {
        ASSERT_EQ(std::bit_cast<uint32_t>(p[i]), std::bit_cast<uint32_t>(p1[i])) << off << " " << i;
        ASSERT_EQ(std::bit_cast<uint32_t>(m[i]), std::bit_cast<uint32_t>(m1[i])) << off << " " << i;
        ASSERT_EQ(std::bit_cast<uint32_t>(v[i]), std::bit_cast<uint32_t>(v1[i])) << off << " " << i;
        ASSERT_EQ(g[i], 0.0f);
        ASSERT_EQ(w[size_t(off + i)], w1[size_t(off + i)]) << dtype_name(type) << " " << off << " " << i;
      }
      for (int64_t i = 0; i < off; i++) ASSERT_EQ(w[size_t(i)], 0xdead);  // nothing before the range
    }
  }
}

}  // namespace

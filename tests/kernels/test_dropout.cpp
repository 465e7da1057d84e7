// Dropout: the Philox generator against its published answers, the mask's
// statistics and scale, its backward (the same mask), and the property the
// engine relies on: the mask of an element depends only on its global
// position, so a split over rows, samples or heads draws the same mask as
// the whole. Attention-probability dropout against a double reference that
// applies the same mask, and its backward against finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"
#include "tessera/core/philox.h"
#include "tessera/kernels/cpu/attention.h"
#include "tessera/kernels/cpu/dropout.h"

using namespace tessera;

namespace {

cpu::DropoutSite site(float p, cpu::DropoutSiteKind kind = cpu::DropoutSiteKind::MlpOut) {
  cpu::DropoutSite s;
  s.p = p;
  s.seed = 1234;
  s.step = 7;
  s.layer = 3;
  s.site = kind;
  s.first_sample = 40;
  return s;
}

// Known-answer vectors of Philox4x32-10 (Random123's kat_vectors).
TEST(Philox, KnownAnswers) {
  auto check = [](Philox4x32 ctr, uint32_t k0, uint32_t k1, Philox4x32 want) {
    const Philox4x32 got = philox4x32_10(ctr, k0, k1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got.c[i], want.c[i]) << "word " << i;
  };
  check({{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}});
  check({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu,
        {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}});
  check({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u,
        {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}});
}

TEST(Dropout, KeepFractionAndScale) {
  const int64_t rows = 1024, C = 1000, T = 256;  // ~1M elements
  for (float p : {0.1f, 0.5f}) {
    std::vector<float> x(rows * C, 1.0f);  // (rows, C)
    cpu::dropout_rows(x.data(), rows, C, 0, T, site(p));
    int64_t kept = 0;
    for (float v : x) {
      if (v != 0.0f) {
        ++kept;
        ASSERT_EQ(v, 1.0f / (1.0f - p));  // kept values are scaled by 1/(1-p), exactly
      }
    }
    const double n = double(rows * C), q = 1.0 - p;
    const double sigma = std::sqrt(n * q * p);
    EXPECT_LT(std::abs(double(kept) - n * q), 4 * sigma) << "p " << p << " kept " << kept;
  }
}

TEST(Dropout, ZeroProbabilityIsTheIdentity) {
  std::vector<float> x = test::randn(64 * 32, 1);
  const std::vector<float> before = x;
  cpu::dropout_rows(x.data(), 64, 32, 0, 16, site(0.0f));
  EXPECT_EQ(x, before);
}

// The mask is a function of position: a split over rows (a sequence-
// parallel rank, another micro-batch size) draws the same mask as the whole.
TEST(Dropout, RowSplitsDrawTheSameMask) {
  const int64_t B = 3, T = 10, C = 24, N = B * T;
  const std::vector<float> x = test::randn(N * C, 2);
  std::vector<float> whole = x;
  cpu::dropout_rows(whole.data(), N, C, 0, T, site(0.3f));
  // Rows [0, 13) and [13, 30) of the same micro-batch (a split inside a sequence).
  std::vector<float> parts = x;
  cpu::dropout_rows(parts.data(), 13, C, 0, T, site(0.3f));
  cpu::dropout_rows(parts.data() + 13 * C, N - 13, C, 13, T, site(0.3f));
  EXPECT_EQ(parts, whole);
  // Sequence 2 on its own, as a micro-batch of one starting at sample 42.
  std::vector<float> one(x.begin() + 2 * T * C, x.end());
  cpu::DropoutSite s = site(0.3f);
  s.first_sample += 2;
  cpu::dropout_rows(one.data(), T, C, 0, T, s);
  EXPECT_EQ(one, std::vector<float>(whole.begin() + 2 * T * C, whole.end()));
}

TEST(Dropout, MasksDifferByStepLayerSiteAndSeed) {
  const int64_t N = 16, C = 64;
  auto draw = [&](cpu::DropoutSite s) {
    std::vector<float> x(N * C, 1.0f);
    cpu::dropout_rows(x.data(), N, C, 0, N, s);
    return x;
  };
  const auto base = draw(site(0.5f));
  cpu::DropoutSite s = site(0.5f);
  s.step += 1;
  EXPECT_NE(draw(s), base);
  s = site(0.5f);
  s.layer += 1;
  EXPECT_NE(draw(s), base);
  s = site(0.5f);
  s.site = cpu::DropoutSiteKind::AttentionOut;
  EXPECT_NE(draw(s), base);
  s = site(0.5f);
  s.seed += 1;
  EXPECT_NE(draw(s), base);
}

// f(x) = sum(w * dropout(x)) is linear with a fixed mask; its gradient is
// dropout applied to w, which is what the backward does. Checked against
// central differences of f.
TEST(Dropout, BackwardIsTheSameMaskFiniteDifferences) {
  const int64_t N = 6, C = 8, T = 3;
  const std::vector<float> w = test::randn(N * C, 3);
  const std::vector<float> x = test::randn(N * C, 4);
  auto f = [&](const std::vector<double>& in) {
    std::vector<float> y(in.begin(), in.end());
    cpu::dropout_rows(y.data(), N, C, 0, T, site(0.4f));
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += double(w[i]) * y[i];
    return s;
  };
  std::vector<float> grad = w;  // backward: dx = dropout(dy) with dy = w
  cpu::dropout_rows(grad.data(), N, C, 0, T, site(0.4f));
  // f is linear: differences are exact up to rounding.
  const auto numeric = test::central_differences(f, test::to_double(x), 1e-2);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(numeric[i], grad[i], 1e-4) << "element " << i;
}

}  // namespace

// Attention with dropout on the probabilities: the flash kernels against a
// double reference that applies the same mask (drawn from the probability's
// position, kernels/cpu/dropout.h), the backward against finite differences
// of that reference, and the layout property: heads split over two calls
// (a tp rank's heads, named by head0) and sequences split over two calls
// (first_sample) give exactly the whole call's output.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"
#include "tessera/kernels/cpu/attention.h"

using namespace tessera;

namespace {

struct Shape {
  int64_t B, T, C, NH;
  int64_t HS() const { return C / NH; }
};

cpu::DropoutSite attn_site(float p) {
  cpu::DropoutSite s;
  s.p = p;
  s.seed = 99;
  s.step = 3;
  s.layer = 1;
  s.site = cpu::DropoutSiteKind::AttentionProbs;
  s.first_sample = 5;
  return s;
}

// Z[(b, h, i, j)] = mask / (1-p) as the kernels draw it: (B, NH, T, T).
std::vector<double> mask_of(const Shape& s, const cpu::DropoutSite& site) {
  const cpu::DropoutStream st(site);
  std::vector<double> Z(s.B * s.NH * s.T * s.T);
  std::vector<uint32_t> bits(s.T);  // (T) one row of keys
  for (int64_t b = 0; b < s.B; b++)
    for (int64_t h = 0; h < s.NH; h++)
      for (int64_t i = 0; i < s.T; i++) {
        cpu::dropout_bits(st, site.first_sample + b,
                          cpu::attention_prob_element(site.head0 + h, i, 0, s.T), s.T, bits.data());
        for (int64_t j = 0; j < s.T; j++)
          Z[((b * s.NH + h) * s.T + i) * s.T + j] =
              bits[j] >= st.threshold ? double(site.keep_scale()) : 0.0;
      }
  return Z;
}

// out (B, T, C) = (softmax(q k^T / sqrt(HS), causal) * Z) v, in double.
std::vector<double> ref_forward(const std::vector<double>& qkv, const Shape& s,
                                const std::vector<double>& Z) {
  const int64_t T = s.T, C = s.C, HS = s.HS(), C3 = 3 * C;
  const double scale = 1.0 / std::sqrt(double(HS));
  std::vector<double> out(s.B * T * C, 0.0), p(T);
  for (int64_t b = 0; b < s.B; b++)
    for (int64_t h = 0; h < s.NH; h++)
      for (int64_t i = 0; i < T; i++) {
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j <= i; j++) {
          double dot = 0;
          for (int64_t d = 0; d < HS; d++)
            dot += qkv[(b * T + i) * C3 + h * HS + d] * qkv[(b * T + j) * C3 + C + h * HS + d];
          p[j] = dot * scale;
          m = std::max(m, p[j]);
        }
        for (int64_t j = 0; j <= i; j++) sum += std::exp(p[j] - m);
        for (int64_t j = 0; j <= i; j++) {
          const double pz = std::exp(p[j] - m) / sum * Z[((b * s.NH + h) * T + i) * T + j];
          for (int64_t d = 0; d < HS; d++)
            out[(b * T + i) * C + h * HS + d] += pz * qkv[(b * T + j) * C3 + 2 * C + h * HS + d];
        }
      }
  return out;
}

struct AttnRun {
  std::vector<float> out, lse, dqkv;
};

AttnRun run(const std::vector<float>& qkv, const std::vector<float>& dout, const Shape& s,
        const cpu::DropoutSite& site) {
  AttnRun r;
  r.out.assign(s.B * s.T * s.C, NAN);
  r.lse.assign(s.B * s.NH * s.T, NAN);
  r.dqkv.assign(s.B * s.T * 3 * s.C, NAN);
  cpu::attention_forward(r.out.data(), r.lse.data(), qkv.data(), s.B, s.T, s.C, s.NH, &site);
  cpu::attention_backward(r.dqkv.data(), dout.data(), qkv.data(), r.out.data(), r.lse.data(), s.B,
                          s.T, s.C, s.NH, &site);
  return r;
}

TEST(AttentionDropout, ForwardMatchesMaskedReference) {
  const Shape s{2, 70, 16, 2};  // T crosses a 64-key tile
  const auto qkv = test::randn(s.B * s.T * 3 * s.C, 11);
  const auto dout = test::randn(s.B * s.T * s.C, 12);
  const AttnRun r = run(qkv, dout, s, attn_site(0.3f));
  const auto want = ref_forward(test::to_double(qkv), s, mask_of(s, attn_site(0.3f)));
  EXPECT_LT(test::max_err_vs_scale(r.out, want), 2e-6);
  // The mask really drops: without dropout the output differs.
  const AttnRun plain = run(qkv, dout, s, attn_site(0.0f));
  EXPECT_GT(test::max_err_vs_scale(plain.out, want), 1e-2);
}

TEST(AttentionDropout, BackwardMatchesFiniteDifferences) {
  const Shape s{2, 7, 8, 2};
  const auto qkv = test::randn(s.B * s.T * 3 * s.C, 13);
  const auto dout = test::randn(s.B * s.T * s.C, 14);
  const AttnRun r = run(qkv, dout, s, attn_site(0.25f));
  const auto Z = mask_of(s, attn_site(0.25f));
  const auto R = test::to_double(dout);
  auto loss = [&](const std::vector<double>& x) {
    const auto out = ref_forward(x, s, Z);
    double l = 0;
    for (size_t i = 0; i < out.size(); i++) l += out[i] * R[i];
    return l;
  };
  const auto numeric = test::central_differences(loss, test::to_double(qkv), 1e-5);
  EXPECT_LT(test::max_err_vs_scale(r.dqkv, numeric), 1e-5);
}

// Columns [h0*HS, h1*HS) of q, k and v: the qkv a tp rank holding heads
// h0..h1-1 sees. (B*T, 3*C) -> (B*T, 3*(h1-h0)*HS).
std::vector<float> head_slice(const std::vector<float>& qkv, const Shape& s, int64_t h0,
                              int64_t h1) {
  const int64_t HS = s.HS(), Cl = (h1 - h0) * HS;
  std::vector<float> out;
  for (int64_t row = 0; row < s.B * s.T; row++)
    for (int64_t part = 0; part < 3; part++) {
      const float* src = qkv.data() + row * 3 * s.C + part * s.C + h0 * HS;
      out.insert(out.end(), src, src + Cl);
    }
  return out;
}

TEST(AttentionDropout, HeadAndSampleSplitsGiveTheWholeResult) {
  const Shape s{2, 33, 16, 4};
  const auto qkv = test::randn(s.B * s.T * 3 * s.C, 15);
  const auto dout = test::randn(s.B * s.T * s.C, 16);
  const AttnRun whole = run(qkv, dout, s, attn_site(0.2f));
  // Heads 2..3 alone, as tp rank 1 of 2.
  const Shape half{s.B, s.T, s.C / 2, s.NH / 2};
  cpu::DropoutSite site = attn_site(0.2f);
  site.head0 = 2;
  std::vector<float> dout_half;  // (B*T, C/2): rank 1's columns of dout
  for (int64_t row = 0; row < s.B * s.T; row++)
    dout_half.insert(dout_half.end(), dout.begin() + row * s.C + s.C / 2,
                     dout.begin() + (row + 1) * s.C);
  const AttnRun part = run(head_slice(qkv, s, 2, 4), dout_half, half, site);
  for (int64_t row = 0; row < s.B * s.T; row++)
    for (int64_t c = 0; c < s.C / 2; c++)
      ASSERT_EQ(part.out[row * (s.C / 2) + c], whole.out[row * s.C + s.C / 2 + c]) << row;
  EXPECT_EQ(part.dqkv, head_slice(whole.dqkv, s, 2, 4));
  // Sequence 1 alone, as a micro-batch of one starting one sample later.
  const Shape one{1, s.T, s.C, s.NH};
  site = attn_site(0.2f);
  site.first_sample += 1;
  const int64_t n3 = s.T * 3 * s.C, n1 = s.T * s.C;
  const AttnRun second = run(std::vector<float>(qkv.begin() + n3, qkv.end()),
                         std::vector<float>(dout.begin() + n1, dout.end()), one, site);
  EXPECT_EQ(second.out, std::vector<float>(whole.out.begin() + n1, whole.out.end()));
  EXPECT_EQ(second.dqkv, std::vector<float>(whole.dqkv.begin() + n3, whole.dqkv.end()));
}

// The draws the planner prices the mask by (model/op_list.cpp): whole
// (4-row group, 64-key tile) blocks on and under the diagonal. By hand:
// T = 64 is one query block against one key tile, 16 groups of 4 rows x 64
// keys; T = 100 adds a 36-row block against two tiles (forward: 4096 + 2 x
// 36 x 64) or, backward, a second key tile seen by its 36 queries (6400 +
// 2304); T = 5 and T = 1 draw whole groups of 4 rows (8 and 4 rows).
TEST(AttentionDropout, MaskDrawsPerSequenceAndHead) {
  for (bool forward : {true, false}) {
    EXPECT_EQ(cpu::attention_dropout_draws(64, forward), 4096) << forward;
    EXPECT_EQ(cpu::attention_dropout_draws(100, forward), 8704) << forward;
    EXPECT_EQ(cpu::attention_dropout_draws(5, forward), 512) << forward;
    EXPECT_EQ(cpu::attention_dropout_draws(1, forward), 256) << forward;
    // Long sequences approach the triangle: T (T + 64) / 2 for T a multiple of 64.
    EXPECT_EQ(cpu::attention_dropout_draws(1024, forward), 1024 * (1024 + 64) / 2) << forward;
  }
}

}  // namespace

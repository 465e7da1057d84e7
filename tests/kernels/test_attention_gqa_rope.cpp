// Grouped-query attention with rotary position embedding (the Llama
// family's attention): the flash kernels against a naive double reference
// that rotates q and k explicitly and materialises the repeated k/v heads,
// the backward against central differences of that reference, with the
// probability dropout too; GPT-2's heads through the new entry points bit
// for bit equal to the (C, NH) kernels; RoPE at position 0 a no-op; the
// 16-bit storage close to fp32.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <ostream>
#include <vector>

#include "kernel_test_util.h"
#include "tessera/core/error.h"
#include "tessera/kernels/cpu/attention.h"
#include "tessera/kernels/cpu/cast.h"
#include "tessera/kernels/cpu/rope.h"

using namespace tessera;

namespace {

struct Shape {
  int64_t B, T, NH, KVH, HS;
  float base;  // 0: no RoPE
  AttentionHeads heads() const { return {NH, KVH, HS, base}; }
  int64_t W() const { return (NH + 2 * KVH) * HS; }  // qkv row
  int64_t C() const { return NH * HS; }              // out row
};

// gtest's name for a failing shape.
void PrintTo(const Shape& s, std::ostream* os) {
  *os << "B " << s.B << " T " << s.T << " NH " << s.NH << " KVH " << s.KVH << " HS " << s.HS
      << " base " << s.base;
}

// x (HS) rotated to position t, in double (HF Llama's rotate_half pairs i, i + HS/2).
void rotate(double* x, int64_t t, int64_t HS, double base, bool inverse) {
  const int64_t half = HS / 2;
  for (int64_t i = 0; i < half; i++) {
    const double a = double(t) * std::pow(base, -2.0 * double(i) / double(HS));
    const double c = std::cos(a), s = inverse ? -std::sin(a) : std::sin(a);
    const double x1 = x[i], x2 = x[i + half];
    x[i] = x1 * c - x2 * s;
    x[i + half] = x2 * c + x1 * s;
  }
}

// The problem as plain MHA in double: q and k rotated, k and v repeated per
// query head. Returns (B, T, 3C).
std::vector<double> expand(const std::vector<double>& qkv, const Shape& s) {
  const int64_t T = s.T, HS = s.HS, C = s.C(), W = s.W(), G = s.NH / s.KVH;
  std::vector<double> e(s.B * T * 3 * C);
  for (int64_t b = 0; b < s.B; b++)
    for (int64_t t = 0; t < T; t++) {
      const double* row = &qkv[(b * T + t) * W];
      double* er = &e[(b * T + t) * 3 * C];
      for (int64_t h = 0; h < s.NH; h++) {
        const int64_t g = h / G;
        for (int64_t d = 0; d < HS; d++) {
          er[h * HS + d] = row[h * HS + d];
          er[C + h * HS + d] = row[C + g * HS + d];
          er[2 * C + h * HS + d] = row[C + s.KVH * HS + g * HS + d];
        }
        if (s.base > 0) {
          rotate(er + h * HS, t, HS, s.base, false);
          rotate(er + C + h * HS, t, HS, s.base, false);
        }
      }
    }
  return e;
}

// The expanded problem's gradient back to the stored qkv: the inverse
// rotation on dq and dk, and each kv head's gradient summed over its group.
std::vector<double> contract(const std::vector<double>& de, const Shape& s) {
  const int64_t T = s.T, HS = s.HS, C = s.C(), W = s.W(), G = s.NH / s.KVH;
  std::vector<double> d(s.B * T * W, 0.0), tmp(HS);
  for (int64_t b = 0; b < s.B; b++)
    for (int64_t t = 0; t < T; t++) {
      const double* er = &de[(b * T + t) * 3 * C];
      double* row = &d[(b * T + t) * W];
      for (int64_t h = 0; h < s.NH; h++) {
        const int64_t g = h / G;
        for (int part = 0; part < 2; part++) {  // dq, dk: turned back
          tmp.assign(er + part * C + h * HS, er + part * C + h * HS + HS);
          if (s.base > 0) rotate(tmp.data(), t, HS, s.base, true);
          double* dst = part == 0 ? row + h * HS : row + C + g * HS;
          for (int64_t i = 0; i < HS; i++) dst[i] += tmp[i];
        }
        for (int64_t i = 0; i < HS; i++) row[C + s.KVH * HS + g * HS + i] += er[2 * C + h * HS + i];
      }
    }
  return d;
}

// The attention-probability dropout mask as the kernels draw it, by query
// head: Z (B, NH, T, T) = mask / (1-p); empty without dropout.
std::vector<double> mask_of(const Shape& s, const DropoutSite* site) {
  if (!site) return {};
  const cpu::DropoutStream st(*site);
  std::vector<double> Z(s.B * s.NH * s.T * s.T);
  std::vector<uint32_t> bits(s.T);
  for (int64_t b = 0; b < s.B; b++)
    for (int64_t h = 0; h < s.NH; h++)
      for (int64_t i = 0; i < s.T; i++) {
        cpu::dropout_bits(st, site->first_sample + b,
                          cpu::attention_prob_element(site->head0 + h, i, 0, s.T), s.T,
                          bits.data());
        for (int64_t j = 0; j < s.T; j++)
          Z[((b * s.NH + h) * s.T + i) * s.T + j] =
              bits[j] >= st.threshold ? double(site->keep_scale()) : 0.0;
      }
  return Z;
}

// Naive causal MHA in double on an expanded e (B, T, 3C), with the full
// (T, T) matrices: out (B, T, C), lse (B, NH, T), and with dout the
// gradient de (B, T, 3C). Z: dropout mask or empty.
void ref_mha(const std::vector<double>& e, const Shape& s, const std::vector<double>& Z,
             std::vector<double>* out, std::vector<double>* lse, const std::vector<double>* dout,
             std::vector<double>* de) {
  const int64_t B = s.B, T = s.T, NH = s.NH, HS = s.HS, C = s.C(), C3 = 3 * C;
  const double scale = 1.0 / std::sqrt(double(HS));
  if (out) out->assign(B * T * C, 0.0);
  if (lse) lse->assign(B * NH * T, 0.0);
  if (de) de->assign(B * T * C3, 0.0);
  std::vector<double> P(T * T);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < NH; h++) {
      auto q = [&](int64_t t) { return &e[(b * T + t) * C3 + h * HS]; };
      auto k = [&](int64_t t) { return &e[(b * T + t) * C3 + C + h * HS]; };
      auto v = [&](int64_t t) { return &e[(b * T + t) * C3 + 2 * C + h * HS]; };
      auto z = [&](int64_t i, int64_t j) {
        return Z.empty() ? 1.0 : Z[((b * NH + h) * T + i) * T + j];
      };
      for (int64_t i = 0; i < T; i++) {
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j <= i; j++) {
          double dot = 0;
          for (int64_t d = 0; d < HS; d++) dot += q(i)[d] * k(j)[d];
          P[i * T + j] = dot * scale;
          m = std::max(m, P[i * T + j]);
        }
        for (int64_t j = 0; j <= i; j++) sum += std::exp(P[i * T + j] - m);
        if (lse) (*lse)[(b * NH + h) * T + i] = m + std::log(sum);
        for (int64_t j = 0; j <= i; j++) P[i * T + j] = std::exp(P[i * T + j] - m) / sum;
        if (out)
          for (int64_t j = 0; j <= i; j++)
            for (int64_t d = 0; d < HS; d++)
              (*out)[(b * T + i) * C + h * HS + d] += P[i * T + j] * z(i, j) * v(j)[d];
        if (de) {
          const double* dO = &(*dout)[(b * T + i) * C + h * HS];
          std::vector<double> dP(i + 1);
          double rowdot = 0;
          for (int64_t j = 0; j <= i; j++) {
            double dot = 0;
            for (int64_t d = 0; d < HS; d++) dot += dO[d] * v(j)[d];
            dP[j] = dot * z(i, j);
            rowdot += dP[j] * P[i * T + j];
          }
          for (int64_t j = 0; j <= i; j++) {
            const double ds = P[i * T + j] * (dP[j] - rowdot) * scale;
            for (int64_t d = 0; d < HS; d++) {
              (*de)[(b * T + i) * C3 + h * HS + d] += ds * k(j)[d];
              (*de)[(b * T + j) * C3 + C + h * HS + d] += ds * q(i)[d];
              (*de)[(b * T + j) * C3 + 2 * C + h * HS + d] += P[i * T + j] * z(i, j) * dO[d];
            }
          }
        }
      }
    }
}

struct AttnRun {
  std::vector<float> qkv, dout, out, lse, dqkv;
};

// A random problem through the fp32 kernels; NaN-filled outputs, so every
// element must be written.
AttnRun run(const Shape& s, uint64_t seed, const DropoutSite* drop = nullptr) {
  AttnRun r;
  r.qkv = test::randn(s.B * s.T * s.W(), seed);
  r.dout = test::randn(s.B * s.T * s.C(), seed + 1);
  r.out.assign(s.B * s.T * s.C(), NAN);
  r.lse.assign(s.B * s.NH * s.T, NAN);
  r.dqkv.assign(s.B * s.T * s.W(), NAN);
  cpu::attention_forward(r.out.data(), r.lse.data(), r.qkv.data(), s.B, s.T, s.heads(), drop);
  cpu::attention_backward(r.dqkv.data(), r.dout.data(), r.qkv.data(), r.out.data(), r.lse.data(),
                          s.B, s.T, s.heads(), drop);
  return r;
}

void expect_matches_reference(const Shape& s, uint64_t seed, const DropoutSite* drop) {
  const AttnRun r = run(s, seed, drop);
  const auto Z = mask_of(s, drop);
  const auto e = expand(test::to_double(r.qkv), s);
  const auto dout = test::to_double(r.dout);
  std::vector<double> out, lse, de;
  ref_mha(e, s, Z, &out, &lse, &dout, &de);
  const auto dqkv = contract(de, s);
  EXPECT_LT(test::max_err_vs_scale(r.out, out), 1e-5) << "out";
  EXPECT_LT(test::max_rel_err(r.lse, lse, 1e-3), 1e-5) << "lse";
  EXPECT_LT(test::max_err_vs_scale(r.dqkv, dqkv), 1e-5) << "dqkv";
}

class GqaRopeVsReference : public ::testing::TestWithParam<Shape> {};

TEST_P(GqaRopeVsReference, ForwardAndBackwardMatch) {
  const Shape s = GetParam();
  expect_matches_reference(s, 300 + s.T, nullptr);
}

// T below, at, across the 64-wide blocks; groups of 1 (MHA), 2, 3 and 4
// query heads per kv head; head sizes 16, 32, 64 and 96 (padded inside the
// kernel); Llama's base, a small one (angles that turn fast), and no RoPE.
INSTANTIATE_TEST_SUITE_P(
    Shapes, GqaRopeVsReference,
    ::testing::Values(Shape{1, 1, 2, 1, 16, 10000}, Shape{2, 37, 4, 2, 16, 10000},
                      Shape{1, 65, 4, 1, 64, 10000}, Shape{2, 100, 6, 2, 32, 500},
                      Shape{1, 130, 2, 2, 64, 10000}, Shape{1, 70, 4, 2, 96, 10000},
                      Shape{2, 50, 4, 2, 16, 0}, Shape{1, 90, 3, 1, 32, 100}));

// The backward's math itself: the kernel's dqkv against central differences
// of the reference forward of L = sum(out * R) (rotation, repetition and
// softmax all differentiated numerically).
TEST(GqaRope, BackwardMatchesFiniteDifferences) {
  const Shape s{2, 7, 4, 2, 4, 10.0f};  // angles up to 6 rad
  const AttnRun r = run(s, 7);
  const auto R = test::to_double(r.dout);
  auto loss = [&](const std::vector<double>& qkv) {
    std::vector<double> out;
    ref_mha(expand(qkv, s), s, {}, &out, nullptr, nullptr, nullptr);
    double l = 0;
    for (size_t i = 0; i < out.size(); i++) l += out[i] * R[i];
    return l;
  };
  const auto numeric = test::central_differences(loss, test::to_double(r.qkv), 1e-5);
  EXPECT_LT(test::max_err_vs_scale(r.dqkv, numeric), 1e-5);
}

DropoutSite attn_site(float p) {
  DropoutSite s;
  s.p = p;
  s.seed = 99;
  s.step = 3;
  s.layer = 1;
  s.site = DropoutSiteKind::AttentionProbs;
  s.first_sample = 5;
  s.head0 = 4;  // a tp rank's first query head
  return s;
}

// Dropout of the probabilities with GQA and RoPE: the mask is the query
// head's, as under MHA.
TEST(GqaRope, DropoutMatchesReference) {
  const DropoutSite site = attn_site(0.3f);
  expect_matches_reference(Shape{2, 70, 4, 2, 16, 10000}, 41, &site);
  expect_matches_reference(Shape{1, 33, 6, 2, 32, 0}, 42, &site);
}

TEST(GqaRope, DropoutBackwardMatchesFiniteDifferences) {
  const Shape s{1, 9, 4, 2, 4, 10.0f};
  const DropoutSite site = attn_site(0.25f);
  const AttnRun r = run(s, 8, &site);
  const auto Z = mask_of(s, &site);
  const auto R = test::to_double(r.dout);
  auto loss = [&](const std::vector<double>& qkv) {
    std::vector<double> out;
    ref_mha(expand(qkv, s), s, Z, &out, nullptr, nullptr, nullptr);
    double l = 0;
    for (size_t i = 0; i < out.size(); i++) l += out[i] * R[i];
    return l;
  };
  const auto numeric = test::central_differences(loss, test::to_double(r.qkv), 1e-5);
  EXPECT_LT(test::max_err_vs_scale(r.dqkv, numeric), 1e-5);
}

// GPT-2's heads through the heads entry points are the (C, NH) kernels bit
// for bit, in every precision, with and without dropout (the fp32 reference
// run depends on it).
template <class T, class FromF>
void expect_mha_same_bits(FromF from_f32, const DropoutSite* drop) {
  const int64_t B = 2, Tn = 150, NH = 3, HS = 32, C = NH * HS;
  const AttentionHeads mha = AttentionHeads::mha(C, NH);
  const auto x = test::randn(B * Tn * 3 * C, 51);
  const auto dout = test::randn(B * Tn * C, 52);
  std::vector<T> qkv(x.size());
  for (size_t i = 0; i < x.size(); i++) qkv[i] = from_f32(x[i]);
  std::vector<T> o1(B * Tn * C), o2(B * Tn * C), d1(qkv.size()), d2(qkv.size());
  std::vector<float> l1(B * NH * Tn), l2(B * NH * Tn);
  if constexpr (std::is_same_v<T, float>) {
    cpu::attention_forward(o1.data(), l1.data(), qkv.data(), B, Tn, C, NH, drop);
    cpu::attention_forward(o2.data(), l2.data(), qkv.data(), B, Tn, mha, drop);
    cpu::attention_backward(d1.data(), dout.data(), qkv.data(), o1.data(), l1.data(), B, Tn, C,
                            NH, drop);
    cpu::attention_backward(d2.data(), dout.data(), qkv.data(), o2.data(), l2.data(), B, Tn, mha,
                            drop);
  } else if constexpr (std::is_same_v<FromF, bf16_t (*)(float)>) {
    cpu::attention_forward_bf16(o1.data(), l1.data(), qkv.data(), B, Tn, C, NH, drop);
    cpu::attention_forward_bf16(o2.data(), l2.data(), qkv.data(), B, Tn, mha, drop);
    cpu::attention_backward_bf16(d1.data(), dout.data(), qkv.data(), o1.data(), l1.data(), B, Tn,
                                 C, NH, drop);
    cpu::attention_backward_bf16(d2.data(), dout.data(), qkv.data(), o2.data(), l2.data(), B, Tn,
                                 mha, drop);
  } else {
    cpu::attention_forward_fp16(o1.data(), l1.data(), qkv.data(), B, Tn, C, NH, drop);
    cpu::attention_forward_fp16(o2.data(), l2.data(), qkv.data(), B, Tn, mha, drop);
    cpu::attention_backward_fp16(d1.data(), dout.data(), qkv.data(), o1.data(), l1.data(), B, Tn,
                                 C, NH, drop);
    cpu::attention_backward_fp16(d2.data(), dout.data(), qkv.data(), o2.data(), l2.data(), B, Tn,
                                 mha, drop);
  }
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(l1, l2);
  EXPECT_EQ(d1, d2);
}

float identity(float x) { return x; }

TEST(GqaRope, MhaHeadsAreTheMhaKernelsBitForBit) {
  const DropoutSite site = attn_site(0.1f);
  for (const DropoutSite* drop : {static_cast<const DropoutSite*>(nullptr), &site}) {
    expect_mha_same_bits<float>(identity, drop);
    expect_mha_same_bits<bf16_t>(static_cast<bf16_t (*)(float)>(cpu::fp32_to_bf16), drop);
    expect_mha_same_bits<fp16_t>(static_cast<fp16_t (*)(float)>(cpu::fp32_to_fp16), drop);
  }
}

// Position 0 is rotated by angle 0: one token with and without RoPE gives
// the same bits. And a sequence's first row is unchanged by RoPE everywhere
// (its only key is itself, also at position 0).
TEST(GqaRope, RopeAtPositionZeroIsTheIdentity) {
  const Shape with{2, 1, 4, 2, 32, 10000}, without{2, 1, 4, 2, 32, 0};
  const AttnRun a = run(with, 61), b = run(without, 61);
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.lse, b.lse);
  EXPECT_EQ(a.dqkv, b.dqkv);
  // Longer sequences: row 0's output and lse unchanged, later rows changed.
  const Shape wl{1, 20, 4, 2, 32, 10000}, nl{1, 20, 4, 2, 32, 0};
  const AttnRun c = run(wl, 62), d = run(nl, 62);
  for (int64_t i = 0; i < wl.C(); i++) EXPECT_EQ(c.out[i], d.out[i]) << i;
  bool later_differ = false;
  for (int64_t i = wl.C(); i < wl.T * wl.C(); i++) later_differ |= c.out[i] != d.out[i];
  EXPECT_TRUE(later_differ);
}

// RoPE makes scores depend on relative positions only: the same q/k/v
// content at every position (a constant sequence) gives a uniform softmax,
// whatever the rotation, so out = v at every row.
TEST(GqaRope, ConstantSequenceAttendsUniformly) {
  const Shape s{1, 80, 4, 2, 16, 10000};
  const auto row = test::randn(s.W(), 71);
  std::vector<float> qkv(s.T * s.W());
  for (int64_t t = 0; t < s.T; t++) std::copy(row.begin(), row.end(), qkv.begin() + t * s.W());
  std::vector<float> out(s.T * s.C()), lse(s.NH * s.T);
  cpu::attention_forward(out.data(), lse.data(), qkv.data(), 1, s.T, s.heads());
  double worst = 0;
  for (int64_t t = 0; t < s.T; t++)
    for (int64_t h = 0; h < s.NH; h++)
      for (int64_t d = 0; d < s.HS; d++) {
        const double v = row[s.C() + s.KVH * s.HS + (h / 2) * s.HS + d];
        worst = std::max(worst, std::abs(out[t * s.C() + h * s.HS + d] - v));
      }
  EXPECT_LT(worst, 1e-5);
}

// 16-bit storage: the kernels widen, compute in fp32 and round once, so
// they stay close to the fp32 kernels on the same (rounded) inputs.
template <class T, class ToF, class FromF, class Fwd, class Bwd>
void expect_lowp_close(ToF to_f32, FromF from_f32, Fwd fwd16, Bwd bwd16, double tol) {
  const Shape s{2, 90, 4, 2, 32, 10000};
  const DropoutSite site = attn_site(0.1f);
  const auto x = test::randn(s.B * s.T * s.W(), 81);
  const auto dout = test::randn(s.B * s.T * s.C(), 82);
  std::vector<T> q16(x.size());
  std::vector<float> qw(x.size());
  for (size_t i = 0; i < x.size(); i++) q16[i] = from_f32(x[i]), qw[i] = to_f32(q16[i]);
  std::vector<float> out(s.B * s.T * s.C()), lse(s.B * s.NH * s.T), dqkv(x.size());
  cpu::attention_forward(out.data(), lse.data(), qw.data(), s.B, s.T, s.heads(), &site);
  cpu::attention_backward(dqkv.data(), dout.data(), qw.data(), out.data(), lse.data(), s.B, s.T,
                          s.heads(), &site);
  std::vector<T> o16(out.size()), d16(x.size());
  std::vector<float> l16(lse.size());
  fwd16(o16.data(), l16.data(), q16.data(), s.B, s.T, s.heads(), &site);
  bwd16(d16.data(), dout.data(), q16.data(), o16.data(), l16.data(), s.B, s.T, s.heads(), &site);
  std::vector<float> ow(o16.size()), dw(d16.size());
  for (size_t i = 0; i < o16.size(); i++) ow[i] = to_f32(o16[i]);
  for (size_t i = 0; i < d16.size(); i++) dw[i] = to_f32(d16[i]);
  EXPECT_LT(test::max_err_vs_scale(ow, out), tol) << "out";
  EXPECT_LT(test::max_rel_err(l16, lse, 1e-3), 1e-5) << "lse";
  EXPECT_LT(test::max_err_vs_scale(dw, dqkv), tol) << "dqkv";
}

TEST(GqaRope, Bf16CloseToFp32) {
  expect_lowp_close<bf16_t>(cpu::bf16_to_fp32, cpu::fp32_to_bf16,
                            static_cast<void (*)(bf16_t*, float*, const bf16_t*, int64_t, int64_t,
                                                 const AttentionHeads&, const DropoutSite*)>(
                                cpu::attention_forward_bf16),
                            static_cast<void (*)(bf16_t*, const float*, const bf16_t*,
                                                 const bf16_t*, const float*, int64_t, int64_t,
                                                 const AttentionHeads&, const DropoutSite*)>(
                                cpu::attention_backward_bf16),
                            1e-2);
}
TEST(GqaRope, Fp16CloseToFp32) {
  expect_lowp_close<fp16_t>(cpu::fp16_to_fp32, cpu::fp32_to_fp16,
                            static_cast<void (*)(fp16_t*, float*, const fp16_t*, int64_t, int64_t,
                                                 const AttentionHeads&, const DropoutSite*)>(
                                cpu::attention_forward_fp16),
                            static_cast<void (*)(fp16_t*, const float*, const fp16_t*,
                                                 const fp16_t*, const float*, int64_t, int64_t,
                                                 const AttentionHeads&, const DropoutSite*)>(
                                cpu::attention_backward_fp16),
                            2e-3);
}

// The backward's tasks are (sequence, kv head): same bits whatever the
// thread count.
TEST(GqaRope, SameBitsWithOneOrTwoThreads) {
  const Shape s{2, 150, 4, 2, 32, 10000};
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const AttnRun a = run(s, 91);
  omp_set_num_threads(2);
  const AttnRun b = run(s, 91);
  omp_set_num_threads(saved);
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.lse, b.lse);
  EXPECT_EQ(a.dqkv, b.dqkv);
}

// Decoding with a KV cache of KVH heads whose keys entered rotated
// (rope_rows), the query rotated inside: position len-1 equals the last row
// of the full forward over len positions.
TEST(GqaRope, DecodeMatchesLastRowOfForward) {
  for (const Shape& s : {Shape{1, 77, 4, 2, 32, 10000}, Shape{1, 70, 6, 1, 16, 0},
                         Shape{1, 66, 4, 4, 64, 500}}) {
    const int64_t T = s.T, W = s.W(), C = s.C(), KVW = s.KVH * s.HS, maxT = 96;
    const auto qkv = test::randn(T * W, 21);
    std::vector<float> out(T * C), lse(s.NH * T);
    cpu::attention_forward(out.data(), lse.data(), qkv.data(), 1, T, s.heads());
    std::vector<float> kc(maxT * KVW, NAN), vc(maxT * KVW, NAN);  // (max_T, KVW); unused rows NaN
    for (int64_t t = 0; t < T; t++)
      for (int64_t c = 0; c < KVW; c++) {
        kc[t * KVW + c] = qkv[t * W + C + c];
        vc[t * KVW + c] = qkv[t * W + C + KVW + c];
      }
    // Keys rotated as they enter the cache: the prompt's rows at once, then
    // one row at a time (the positions are pos0 + r either way).
    if (s.base > 0) {
      cpu::rope_rows(kc.data(), 40, KVW, s.KVH, s.HS, 0, s.base);
      for (int64_t t = 40; t < T; t++)
        cpu::rope_rows(kc.data() + t * KVW, 1, KVW, s.KVH, s.HS, t, s.base);
    }
    for (int64_t len : {int64_t(1), int64_t(2), int64_t(64), int64_t(65), T}) {
      std::vector<float> dec(C, NAN);
      cpu::attention_decode(dec.data(), &qkv[(len - 1) * W], kc.data(), vc.data(), len,
                            s.heads());
      std::vector<float> want(out.begin() + (len - 1) * C, out.begin() + len * C);
      EXPECT_LT(test::max_err_vs_scale(dec, want), 1e-5) << "len " << len << " KVH " << s.KVH;
    }
  }
}

TEST(GqaRope, RefusesHeadsThatDoNotGroup) {
  std::vector<float> qkv(1000), out(1000), lse(100);
  EXPECT_THROW(cpu::attention_forward(out.data(), lse.data(), qkv.data(), 1, 2,
                                      AttentionHeads{6, 4, 8, 0.0f}),
               Error);
  EXPECT_THROW(cpu::attention_forward(out.data(), lse.data(), qkv.data(), 1, 2,
                                      AttentionHeads{4, 2, 7, 10000.0f}),
               Error);
}

}  // namespace

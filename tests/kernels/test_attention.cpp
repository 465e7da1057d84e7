// Flash attention against a naive full-matrix double reference, a
// finite-difference check of the backward, and decode against the forward.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernel_test_util.h"
#include "tessera/kernels/cpu/attention.h"

using namespace tessera;

namespace {

struct Shape {
  int64_t B, T, C, NH;
  int64_t HS() const { return C / NH; }
};

// Naive causal attention in double, materialising the (T, T) matrices.
// out (B, T, C), lse (B, NH, T).
void ref_forward(std::vector<double>& out, std::vector<double>& lse, const std::vector<double>& qkv,
                 const Shape& s) {
  const int64_t B = s.B, T = s.T, C = s.C, NH = s.NH, HS = s.HS(), C3 = 3 * C;
  const double scale = 1.0 / std::sqrt(double(HS));
  out.assign(B * T * C, 0.0);
  lse.assign(B * NH * T, 0.0);
  std::vector<double> p(T);  // (T) one row of probabilities
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < NH; h++)
      for (int64_t i = 0; i < T; i++) {
        const double* q = &qkv[(b * T + i) * C3 + h * HS];
        double m = -INFINITY;
        for (int64_t j = 0; j <= i; j++) {
          const double* k = &qkv[(b * T + j) * C3 + C + h * HS];
          double dot = 0;
          for (int64_t d = 0; d < HS; d++) dot += q[d] * k[d];
          p[j] = dot * scale;
          m = std::max(m, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; j++) sum += std::exp(p[j] - m);
        lse[(b * NH + h) * T + i] = m + std::log(sum);
        for (int64_t j = 0; j <= i; j++) {
          const double pj = std::exp(p[j] - m) / sum;
          const double* v = &qkv[(b * T + j) * C3 + 2 * C + h * HS];
          for (int64_t d = 0; d < HS; d++) out[(b * T + i) * C + h * HS + d] += pj * v[d];
        }
      }
}

// Naive backward in double from the full P matrix. dqkv (B, T, 3C).
void ref_backward(std::vector<double>& dqkv, const std::vector<double>& dout,
                  const std::vector<double>& qkv, const Shape& s) {
  const int64_t B = s.B, T = s.T, C = s.C, NH = s.NH, HS = s.HS(), C3 = 3 * C;
  const double scale = 1.0 / std::sqrt(double(HS));
  dqkv.assign(B * T * C3, 0.0);
  std::vector<double> P(T * T), dP(T * T);  // (T, T) per head, causal part only
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < NH; h++) {
      auto q = [&](int64_t t) { return &qkv[(b * T + t) * C3 + h * HS]; };
      auto k = [&](int64_t t) { return &qkv[(b * T + t) * C3 + C + h * HS]; };
      auto v = [&](int64_t t) { return &qkv[(b * T + t) * C3 + 2 * C + h * HS]; };
      auto dO = [&](int64_t t) { return &dout[(b * T + t) * C + h * HS]; };
      for (int64_t i = 0; i < T; i++) {
        double m = -INFINITY;
        for (int64_t j = 0; j <= i; j++) {
          double dot = 0;
          for (int64_t d = 0; d < HS; d++) dot += q(i)[d] * k(j)[d];
          P[i * T + j] = dot * scale;
          m = std::max(m, P[i * T + j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; j++) sum += (P[i * T + j] = std::exp(P[i * T + j] - m));
        for (int64_t j = 0; j <= i; j++) P[i * T + j] /= sum;
        double rowdot = 0;  // sum_j P_ij dP_ij
        for (int64_t j = 0; j <= i; j++) {
          double dot = 0;
          for (int64_t d = 0; d < HS; d++) dot += dO(i)[d] * v(j)[d];
          dP[i * T + j] = dot;
          rowdot += dot * P[i * T + j];
        }
        for (int64_t j = 0; j <= i; j++) {
          const double ds = P[i * T + j] * (dP[i * T + j] - rowdot) * scale;
          for (int64_t d = 0; d < HS; d++) {
            dqkv[(b * T + i) * C3 + h * HS + d] += ds * k(j)[d];
            dqkv[(b * T + j) * C3 + C + h * HS + d] += ds * q(i)[d];
            dqkv[(b * T + j) * C3 + 2 * C + h * HS + d] += P[i * T + j] * dO(i)[d];
          }
        }
      }
    }
}

struct AttnRun {
  std::vector<float> qkv, out, lse, dout, dqkv;
};

// Random problem run through the kernels. Scores are O(1): q, k ~ N(0, 1).
AttnRun run_kernels(const Shape& s, uint64_t seed) {
  AttnRun r;
  r.qkv = test::randn(s.B * s.T * 3 * s.C, seed);
  r.dout = test::randn(s.B * s.T * s.C, seed + 1);
  r.out.assign(s.B * s.T * s.C, NAN);
  r.lse.assign(s.B * s.NH * s.T, NAN);
  // NaN-filled: the backward must write every element, not accumulate.
  r.dqkv.assign(s.B * s.T * 3 * s.C, NAN);
  cpu::attention_forward(r.out.data(), r.lse.data(), r.qkv.data(), s.B, s.T, s.C, s.NH);
  cpu::attention_backward(r.dqkv.data(), r.dout.data(), r.qkv.data(), r.out.data(), r.lse.data(),
                          s.B, s.T, s.C, s.NH);
  return r;
}

class AttentionVsReference : public ::testing::TestWithParam<Shape> {};

TEST_P(AttentionVsReference, ForwardAndBackwardMatch) {
  const Shape s = GetParam();
  const AttnRun r = run_kernels(s, 100 + s.T);
  std::vector<double> out, lse, dqkv;
  const auto qkv = test::to_double(r.qkv);
  ref_forward(out, lse, qkv, s);
  ref_backward(dqkv, test::to_double(r.dout), qkv, s);
  // fp32 kernels vs a double reference, error relative to each tensor's
  // largest entry: ~1e-7 is typical, 1e-5 the bar.
  EXPECT_LT(test::max_err_vs_scale(r.out, out), 1e-5) << "out";
  EXPECT_LT(test::max_rel_err(r.lse, lse, 1e-3), 1e-5) << "lse";
  EXPECT_LT(test::max_err_vs_scale(r.dqkv, dqkv), 1e-5) << "dqkv";
}

// Block size is 64: T below, at, just above and across several blocks; head
// sizes 64 (GPT-2), 16, and 96 (padded to two 64-wide chunks inside the kernel).
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionVsReference,
                         ::testing::Values(Shape{1, 1, 64, 1}, Shape{2, 37, 128, 2},
                                           Shape{1, 64, 64, 1}, Shape{1, 65, 128, 2},
                                           Shape{2, 100, 64, 4}, Shape{1, 130, 128, 2},
                                           Shape{1, 200, 32, 2}, Shape{1, 70, 192, 2}));

// The kernel's dqkv against central differences of the double reference
// forward for L = sum(out * R): checks the backward math itself, independent
// of ref_backward.
TEST(Attention, BackwardMatchesFiniteDifferences) {
  const Shape s{2, 7, 8, 2};  // HS = 4
  const AttnRun r = run_kernels(s, 7);
  const auto R = test::to_double(r.dout);
  auto loss = [&](const std::vector<double>& qkv) {
    std::vector<double> out, lse;
    ref_forward(out, lse, qkv, s);
    double l = 0;
    for (size_t i = 0; i < out.size(); i++) l += out[i] * R[i];
    return l;
  };
  const auto numeric = test::central_differences(loss, test::to_double(r.qkv), 1e-5);
  EXPECT_LT(test::max_err_vs_scale(r.dqkv, numeric), 1e-5);
}

// Deterministic for a fixed thread count, and here also across thread counts:
// each output element is produced by one thread in a fixed order.
TEST(Attention, SameBitsWithOneOrTwoThreads) {
  const Shape s{2, 150, 128, 2};
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const AttnRun a = run_kernels(s, 3);
  omp_set_num_threads(2);
  const AttnRun b = run_kernels(s, 3);
  omp_set_num_threads(saved);
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.lse, b.lse);
  EXPECT_EQ(a.dqkv, b.dqkv);
}

// Large scores: the online softmax must not overflow (a naive exp would).
TEST(Attention, LargeScoresStayFinite) {
  const Shape s{1, 90, 64, 1};
  std::vector<float> qkv = test::randn(s.T * 3 * s.C, 11, 30.0f);
  std::vector<float> out(s.T * s.C), lse(s.T);
  cpu::attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  std::vector<double> rout, rlse;
  ref_forward(rout, rlse, test::to_double(qkv), s);
  EXPECT_LT(test::max_err_vs_scale(out, rout), 1e-5);
  EXPECT_LT(test::max_rel_err(lse, rlse, 1e-3), 1e-5);
}

// Decoding position len-1 against the KV cache equals the last row of the
// full causal forward over the first len positions.
TEST(Attention, DecodeMatchesLastRowOfForward) {
  const int64_t T = 77, C = 128, NH = 2, maxT = 96;
  const std::vector<float> qkv = test::randn(T * 3 * C, 21);
  std::vector<float> out(T * C), lse(NH * T);
  cpu::attention_forward(out.data(), lse.data(), qkv.data(), 1, T, C, NH);
  std::vector<float> kc(maxT * C, NAN), vc(maxT * C, NAN);  // (max_T, C); unused rows stay NaN
  for (int64_t t = 0; t < T; t++)
    for (int64_t c = 0; c < C; c++) {
      kc[t * C + c] = qkv[t * 3 * C + C + c];
      vc[t * C + c] = qkv[t * 3 * C + 2 * C + c];
    }
  for (int64_t len : {int64_t(1), int64_t(2), int64_t(64), int64_t(65), T}) {
    // Causality: row len-1 of a forward over T equals that of a forward over len.
    std::vector<float> dec(C, NAN);
    cpu::attention_decode(dec.data(), &qkv[(len - 1) * 3 * C], kc.data(), vc.data(), len, C, NH);
    std::vector<float> want(out.begin() + (len - 1) * C, out.begin() + len * C);
    EXPECT_LT(test::max_err_vs_scale(dec, want), 1e-5) << "len " << len;
  }
}

}  // namespace

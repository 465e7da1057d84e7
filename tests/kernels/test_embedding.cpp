// Token and position embeddings: values, vocab slices, deterministic backward.
#include <gtest/gtest.h>
#include <omp.h>

#include <vector>

#include "kernel_test_util.h"
#include "tessera/kernels/cpu/embedding.h"

using namespace tessera;

namespace {

TEST(Embedding, TokenForwardOnVocabSlice) {
  const int64_t N = 6, C = 20, vb = 10, ve = 15;  // this rank holds tokens 10..14
  const auto wte = test::randn((ve - vb) * C, 1);
  const std::vector<int32_t> tok = {10, 14, 3, 15, 12, 12};
  std::vector<float> out(N * C, NAN);
  cpu::token_embedding_forward(out.data(), tok.data(), wte.data(), N, C, vb, ve);
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) {
      const bool in = tok[n] >= vb && tok[n] < ve;
      EXPECT_EQ(out[n * C + c], in ? wte[(tok[n] - vb) * C + c] : 0.0f) << n << "," << c;
    }
}

// Embedding is linear, so the finite-difference gradient of L = sum(out * R)
// wrt wte[v][c] is exactly the sum of R rows whose token is v; computed here
// in double and compared with the accumulated dwte. Repeated tokens exercise
// the scatter that must not race.
TEST(Embedding, TokenBackwardMatchesFiniteDifferences) {
  const int64_t N = 500, C = 33, vb = 0, ve = 7;
  std::vector<int32_t> tok(N);
  for (int64_t n = 0; n < N; n++) tok[n] = int32_t(rng_u64(5, 0, n) % 9);  // 7, 8: out of slice
  const auto R = test::randn(N * C, 2);
  auto wte = test::to_double(test::randn((ve - vb) * C, 3));
  auto loss = [&] {
    double l = 0;
    for (int64_t n = 0; n < N; n++)
      if (tok[n] < ve)
        for (int64_t c = 0; c < C; c++) l += wte[(tok[n] - vb) * C + c] * R[n * C + c];
    return l;
  };
  std::vector<double> numeric(wte.size());
  for (size_t i = 0; i < wte.size(); i++) {
    const double v = wte[i], eps = 1e-3;
    wte[i] = v + eps;
    const double lp = loss();
    wte[i] = v - eps;
    const double lm = loss();
    wte[i] = v;
    numeric[i] = (lp - lm) / (2 * eps) + 1.0;  // + the initial value below
  }
  std::vector<float> dwte((ve - vb) * C, 1.0f);  // accumulates onto 1
  cpu::token_embedding_backward(dwte.data(), R.data(), tok.data(), N, C, vb, ve);
  EXPECT_LT(test::max_err_vs_scale(dwte, numeric), 1e-5);
}

// Each dwte row sums its positions in position order: same bits for any
// thread count, and equal to a sequential float loop.
TEST(Embedding, TokenBackwardIsDeterministic) {
  const int64_t N = 2000, C = 64, vb = 100, ve = 131;
  std::vector<int32_t> tok(N);
  for (int64_t n = 0; n < N; n++) tok[n] = int32_t(90 + rng_u64(6, 0, n) % 50);
  const auto R = test::randn(N * C, 4);
  std::vector<float> seq((ve - vb) * C, 0.0f);
  for (int64_t n = 0; n < N; n++)
    if (tok[n] >= vb && tok[n] < ve)
      for (int64_t c = 0; c < C; c++) seq[(tok[n] - vb) * C + c] += R[n * C + c];
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    std::vector<float> d((ve - vb) * C, 0.0f);
    cpu::token_embedding_backward(d.data(), R.data(), tok.data(), N, C, vb, ve);
    EXPECT_EQ(d, seq) << threads << " threads";
  }
  omp_set_num_threads(saved);
}

TEST(Embedding, PositionForwardAddsRowsFromPos0) {
  const int64_t B = 2, T = 5, C = 17, pos0 = 3, maxT = 10;
  const auto wpe = test::randn(maxT * C, 7);
  const auto base = test::randn(B * T * C, 8);
  std::vector<float> out = base;
  cpu::position_embedding_forward(out.data(), wpe.data(), B, T, C, pos0);
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++)
      for (int64_t c = 0; c < C; c++) {
        const int64_t i = (b * T + t) * C + c;
        EXPECT_EQ(out[i], base[i] + wpe[(pos0 + t) * C + c]);
      }
}

// dwpe[t] += sum over b of dout[b, t] (the exact gradient of the linear
// L = sum((x + wpe) * R)), accumulated onto an initial value.
TEST(Embedding, PositionBackwardSumsOverBatch) {
  const int64_t B = 3, T = 9, C = 21;
  const auto R = test::randn(B * T * C, 9);
  std::vector<float> dwpe(T * C, -0.5f);
  cpu::position_embedding_backward(dwpe.data(), R.data(), B, T, C);
  std::vector<double> numeric(T * C, -0.5);
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < T * C; i++) numeric[i] += R[b * T * C + i];
  EXPECT_LT(test::max_err_vs_scale(dwpe, numeric), 1e-6);
}

}  // namespace

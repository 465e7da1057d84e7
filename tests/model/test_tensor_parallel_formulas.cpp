// Single-process checks of tensor parallelism's closed forms: the tp
// communication volume per micro-batch and the activation memory that
// sequence parallelism saves (the multi-rank test measures both for real).
#include <gtest/gtest.h>

#include "tessera/model/activations.h"
#include "tessera/model/tensor_parallel.h"

using namespace tessera;

TEST(TensorParallelFormulas, CommunicationElements) {
  GPTConfig m;
  m.num_layers = 3;
  m.hidden_size = 64;
  const int64_t B = 2, T = 32, N = B * T, NC = N * 64;
  EXPECT_EQ(tp_comm_elements_per_microbatch(m, B, T, 1, false).total(), 0);
  // No SP: 4 all-reduces of B*T*C per layer, the embedding's and the head's,
  // and the loss statistics (max, then sum-exp and target logit).
  auto e = tp_comm_elements_per_microbatch(m, B, T, 2, false);
  EXPECT_EQ(e.all_reduce, 3 * 4 * NC + NC + NC + 3 * N);
  EXPECT_EQ(e.reduce_scatter + e.all_gather, 0);
  // A middle pipeline stage: the layers only.
  EXPECT_EQ(tp_comm_elements_per_microbatch(m, B, T, 4, false, 1, false, false).all_reduce, 4 * NC);
  // SP: per layer 6 all-gathers and 4 reduce-scatters of B*T*C.
  auto s = tp_comm_elements_per_microbatch(m, B, T, 2, true, 1, false, false);
  EXPECT_EQ(s.all_gather, 6 * NC);
  EXPECT_EQ(s.reduce_scatter, 4 * NC);
  EXPECT_EQ(s.all_reduce, 4 * 64);
}

TEST(TensorParallelFormulas, SequenceParallelActivationSaving) {
  ActShape a;
  a.B = 2;
  a.T = 32;
  a.C = 64;
  a.NH = 2;
  a.Cl = 32;
  a.F = 128;
  a.V = 50;
  a.L = 3;
  ActShape s = a;
  s.Ts = a.T / 2;  // tp = 2
  const int64_t N = a.B * a.T, Ns = s.Ns();
  EXPECT_EQ(Ns, N / 2);
  EXPECT_TRUE(s.sp());
  // Row-split buffers (every size here is a multiple of 16 floats): per layer
  // ln1, res_mid, ln2, res_out (C each) and 4 LayerNorm statistics; the
  // embeddings, final LayerNorm (C + 2) and dresid (C). SP adds one (N, C)
  // gather buffer.
  const int64_t per_row = a.L * (4 * a.C + 4) + a.C + (a.C + 2) + a.C;
  const int64_t saved = (N - Ns) * per_row - N * a.C;
  EXPECT_EQ(activations_bytes(a) - activations_bytes(s), 4 * saved);
}

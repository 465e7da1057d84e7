// Ring (context-parallel) attention's block kernels against the full causal
// attention of one process: the sequence split as context-parallel ranks
// hold it (2*cp chunks, rank r holding chunks r and 2*cp-1-r), every rank's
// queries merged over every rank's key/value block in ring order, must give
// the full kernel's out and lse at those global positions, and the backward
// ring its dq, dk, dv, to 1e-6 of each tensor's scale: GPT-2's heads, GQA
// with RoPE, and the probability dropout. The same merge with local
// positions instead of global ones must not match (the test can fail).
#include <gtest/gtest.h>

#include <ostream>
#include <utility>
#include <vector>

#include "kernel_test_util.h"
#include "ring_attention_case.h"
#include "tessera/kernels/context_chunks.h"
#include "tessera/kernels/cpu/attention.h"
#include "tessera/kernels/cpu/attention_ring.h"

using namespace tessera;

namespace {

using Case = test::RingAttentionCase;
using test::site_of;

// What one process computes: out (B, T, C), lse (B, NH, T), dqkv (B, T, W).
struct Full {
  std::vector<float> out, lse, dqkv;
};

Full full(const Case& c, const std::vector<float>& qkv, const std::vector<float>& dout,
          const DropoutSite* drop) {
  const AttentionHeads hd = c.heads();
  Full f{std::vector<float>(c.B * c.T * hd.q_width()), std::vector<float>(c.B * c.NH * c.T),
         std::vector<float>(qkv.size())};
  cpu::attention_forward(f.out.data(), f.lse.data(), qkv.data(), c.B, c.T, hd, drop);
  cpu::attention_backward(f.dqkv.data(), dout.data(), qkv.data(), f.out.data(), f.lse.data(), c.B,
                          c.T, hd, drop);
  return f;
}

// rows (B, Tl, width) = rows pos[t] of x (B, T, width).
std::vector<float> gather(const std::vector<float>& x, int64_t B, int64_t T, int64_t width,
                          const std::vector<int64_t>& pos) {
  const int64_t Tl = int64_t(pos.size());
  std::vector<float> rows(B * Tl * width);
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < Tl; t++)
      std::copy_n(&x[(b * T + pos[t]) * width], width, &rows[(b * Tl + t) * width]);
  return rows;
}

// The cp ranks' results reassembled into the single-process shapes (the
// same layout as Full). global_positions false: each rank's rows claim
// positions 0..T/cp-1 (a wrong layout, which must not match).
Full ring(const Case& c, int64_t cp, const std::vector<float>& qkv,
          const std::vector<float>& dout, const DropoutSite* drop, bool global_positions = true) {
  const AttentionHeads hd = c.heads();
  const int64_t B = c.B, T = c.T, NH = c.NH, C = hd.q_width(), W = hd.qkv_width();
  const int64_t KW = 2 * hd.kv_width(), Tl = T / cp;
  std::vector<std::vector<int64_t>> rows(cp), pos(cp);  // (Tl) each: where the rows sit, what they claim
  std::vector<std::vector<float>> q(cp), kv(cp), go(cp);  // (B, Tl, W), (B, Tl, KW), (B, Tl, C)
  for (int64_t r = 0; r < cp; r++) {
    rows[r] = ContextChunks{T, cp, r}.positions();
    pos[r] = rows[r];
    if (!global_positions)
      for (int64_t t = 0; t < Tl; t++) pos[r][t] = t;
    q[r] = gather(qkv, B, T, W, rows[r]);
    go[r] = gather(dout, B, T, C, rows[r]);
    kv[r].resize(B * Tl * KW);
    cpu::ring_kv_pack(kv[r].data(), q[r].data(), B, Tl, hd);
  }
  Full f{std::vector<float>(B * T * C), std::vector<float>(B * NH * T),
         std::vector<float>(qkv.size())};
  std::vector<std::vector<float>> dkv(cp, std::vector<float>(B * Tl * KW, 0.0f));  // (B, Tl, KW)
  for (int64_t r = 0; r < cp; r++) {
    std::vector<float> out(B * Tl * C), lse(B * NH * Tl), D(B * NH * Tl);  // (B, Tl, C), (B, NH, Tl) x2
    std::vector<float> dq(B * Tl * C, 0.0f);                               // (B, Tl, C)
    cpu::ring_attention_forward_init(out.data(), lse.data(), B, Tl, hd);
    // Ring step s: rank r holds the block of rank r - s.
    for (int64_t s = 0; s < cp; s++) {
      const int64_t src = (r - s + cp) % cp;
      cpu::ring_attention_forward_block(out.data(), lse.data(), q[r].data(), pos[r].data(), Tl,
                                        kv[src].data(), pos[src].data(), Tl, B, T, hd, drop);
    }
    cpu::ring_attention_backward_init(D.data(), go[r].data(), out.data(), B, Tl, hd);
    for (int64_t s = 0; s < cp; s++) {
      const int64_t src = (r - s + cp) % cp;
      cpu::ring_attention_backward_block(dq.data(), dkv[src].data(), go[r].data(), q[r].data(),
                                         lse.data(), D.data(), pos[r].data(), Tl, kv[src].data(),
                                         pos[src].data(), Tl, B, T, hd, drop);
    }
    for (int64_t b = 0; b < B; b++)
      for (int64_t t = 0; t < Tl; t++) {
        const int64_t g = rows[r][t];
        std::copy_n(&out[(b * Tl + t) * C], C, &f.out[(b * T + g) * C]);
        std::copy_n(&dq[(b * Tl + t) * C], C, &f.dqkv[(b * T + g) * W]);
        for (int64_t h = 0; h < NH; h++) f.lse[(b * NH + h) * T + g] = lse[(b * NH + h) * Tl + t];
      }
  }
  for (int64_t r = 0; r < cp; r++)
    for (int64_t b = 0; b < B; b++)
      for (int64_t t = 0; t < Tl; t++)
        std::copy_n(&dkv[r][(b * Tl + t) * KW], KW, &f.dqkv[(b * T + rows[r][t]) * W + C]);
  return f;
}

class RingAttention : public ::testing::TestWithParam<Case> {};

TEST_P(RingAttention, ChunksMergedEqualFullAttention) {
  const Case c = GetParam();
  const AttentionHeads hd = c.heads();
  const auto qkv = test::randn(c.B * c.T * hd.qkv_width(), 1, 1.0f);
  const auto dout = test::randn(c.B * c.T * hd.q_width(), 2, 1.0f);
  const DropoutSite site = site_of(c);
  const DropoutSite* drop = c.drop_p > 0 ? &site : nullptr;
  const Full want = full(c, qkv, dout, drop);
  for (int64_t cp : {1, 2, 4}) {
    SCOPED_TRACE(::testing::Message() << "cp " << cp);
    const Full got = ring(c, cp, qkv, dout, drop);
    EXPECT_LT(test::max_err_vs_scale(got.out, want.out), 1e-6);
    EXPECT_LT(test::max_err_vs_scale(got.lse, want.lse), 1e-6);
    EXPECT_LT(test::max_err_vs_scale(got.dqkv, want.dqkv), 1e-6);
  }
}

// Local positions break the causal mask, RoPE and the dropout keys alike:
// the comparison above is able to fail.
TEST_P(RingAttention, LocalPositionsDoNotMatch) {
  const Case c = GetParam();
  const AttentionHeads hd = c.heads();
  const auto qkv = test::randn(c.B * c.T * hd.qkv_width(), 1, 1.0f);
  const auto dout = test::randn(c.B * c.T * hd.q_width(), 2, 1.0f);
  const DropoutSite site = site_of(c);
  const DropoutSite* drop = c.drop_p > 0 ? &site : nullptr;
  const Full want = full(c, qkv, dout, drop);
  const Full got = ring(c, 2, qkv, dout, drop, /*global_positions=*/false);
  EXPECT_GT(test::max_err_vs_scale(got.out, want.out), 1e-2);
}

INSTANTIATE_TEST_SUITE_P(
    Heads, RingAttention,
    ::testing::Values(Case{2, 64, 4, 4, 16, 0.0f, 0.0f},         // GPT-2's heads
                      Case{2, 64, 4, 2, 16, 10000.0f, 0.0f},     // GQA with RoPE
                      Case{2, 64, 4, 1, 32, 500000.0f, 0.0f},    // one kv head, Llama 3's base
                      Case{2, 64, 4, 4, 16, 0.0f, 0.1f},         // probability dropout
                      Case{2, 96, 6, 2, 16, 10000.0f, 0.2f}));   // GQA, RoPE and dropout

// The load-balanced layout: rank r holds chunks r and 2cp-1-r, so the
// ranks together hold every position once and the same causal work.
TEST(ContextChunks, MirroredChunksCoverTheSequenceOnce) {
  const int64_t T = 48, cp = 3;
  std::vector<int> seen(T, 0);
  for (int64_t r = 0; r < cp; r++) {
    const ContextChunks ch{T, cp, r};
    ASSERT_TRUE(ch.divides());
    const auto p = ch.positions();
    ASSERT_EQ(int64_t(p.size()), T / cp);
    EXPECT_EQ(p.front(), r * 8);
    EXPECT_EQ(p[8], (2 * cp - 1 - r) * 8);
    int64_t work = 0;  // keys each rank's queries see
    for (int64_t q : p) {
      seen[q]++;
      work += q + 1;
    }
    EXPECT_EQ(work, (T / cp) * (T + 1) / 2);  // every rank the same
  }
  for (int s : seen) EXPECT_EQ(s, 1);
  EXPECT_FALSE((ContextChunks{50, 3, 0}.divides()));
  EXPECT_EQ((ContextChunks{16, 1, 0}.positions()), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8,
                                                                         9, 10, 11, 12, 13, 14, 15}));
}

// chunk_runs: any block of a rank's flattened (B, local_T) rows (a
// sequence-parallel block may start mid-chunk and cross chunks and samples)
// comes out as runs, in row order, whose rows are exactly position(t) of
// their sample; cp = 1 gives whole sequences (odd T too).
TEST(ContextChunks, RunsMapEveryRowToItsPosition) {
  for (const ContextChunks ch : {ContextChunks{48, 3, 1}, ContextChunks{48, 3, 2},
                                 ContextChunks{15, 1, 0}}) {
    const int64_t B = 3, Tl = ch.local_T();
    for (const auto& [row0, rows] : std::vector<std::pair<int64_t, int64_t>>{
             {0, B * Tl}, {5, 13}, {Tl - 3, 7}, {2 * Tl - 1, Tl + 1}}) {
      int64_t next = 0;  // the next local row expected
      chunk_runs(ch, row0, rows, [&](const ChunkRun& r) {
        EXPECT_EQ(r.local, next);
        EXPECT_GT(r.len, 0);
        for (int64_t i = 0; i < r.len; ++i) {
          const int64_t row = row0 + r.local + i;
          EXPECT_EQ(r.sample, row / Tl);
          const int64_t t = row % Tl;  // (ContextChunks::position wants T % 2cp == 0)
          EXPECT_EQ(r.position + i, ch.cp > 1 ? ch.position(t) : t) << "row " << row;
        }
        next += r.len;
      });
      EXPECT_EQ(next, rows) << "cp " << ch.cp << " rows from " << row0;
    }
  }
}

}  // namespace

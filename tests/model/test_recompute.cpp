// Activation recomputation: every mode trains the same model bit for bit (in
// fp32 and with 16-bit activations), its arena holds exactly what
// ActShape::recompute (and ActShape::precision) says it keeps, and the FLOP
// report's hardware - model difference is exactly the recomputed forward.
#include <gtest/gtest.h>

#include "tiny_model.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "expect_error.h"
#include "tessera/core/error.h"
#include "tessera/core/rng.h"
#include "tessera/model/flops.h"
#include "tessera/model/gpt.h"
#include "tessera/config/parallel_config.h"

namespace tessera {
namespace {

// Every view size below is a multiple of 16 floats (test::gpt16), so the
// 64-byte alignment of the arena adds nothing and the formulas are exact.
GPTConfig tiny() { return test::gpt16(3); }
constexpr int64_t kB = 2;

struct Result {
  float loss = 0;
  std::vector<float> losses, grads;
  int64_t arena_bytes = 0;
};

void batch(std::vector<int32_t>& in, std::vector<int32_t>& tgt, uint64_t seed, int64_t V) {
  for (size_t i = 0; i < in.size(); ++i) {
    in[i] = int32_t(rng_u64(seed, 0, i) % uint64_t(V));
    tgt[i] = int32_t(rng_u64(seed, 1, i) % uint64_t(V));
  }
  tgt[5] = -1;  // an ignored target
}

// Two micro-batches: forward then backward each, gradients accumulating.
Result train(Recompute rc, Precision p = Precision::Fp32) {
  const GPTConfig m = tiny();
  ParamLayout layout = ParamLayout::build(m, ParallelConfig{}, 0, 0);
  GPT model(m, layout, {.precision = p, .recompute = rc});
  model.init(7);
  model.refresh_working_copy();
  const int64_t N = kB * m.seq_length;
  Activations acts;
  activations_init(acts, model.act_shape(kB, m.seq_length));
  EXPECT_EQ(acts.s.recompute, rc);
  EXPECT_EQ(acts.s.precision, p);
  Result r;
  std::vector<int32_t> in(N), tgt(N);
  for (uint64_t mb = 0; mb < 2; ++mb) {
    batch(in, tgt, 100 + mb, m.vocab_size);
    r.loss += model.forward(acts, in.data(), tgt.data());
    r.losses.insert(r.losses.end(), acts.losses, acts.losses + N);
    model.backward(acts, in.data(), tgt.data(), 1.0f / float(N - 1));
  }
  r.grads.assign(model.grads().f32(), model.grads().f32() + layout.numel());
  r.arena_bytes = acts.bytes();
  return r;
}

// Recomputation reruns the same kernels on the same inputs: bit for bit.
TEST(Recompute, LossAndEveryGradientEqualNoRecompute) {
  const Result ref = train(Recompute::None);
  for (Recompute rc : {Recompute::Selective, Recompute::Full}) {
    const Result r = train(rc);
    EXPECT_EQ(r.loss, ref.loss) << recompute_name(rc);
    ASSERT_EQ(r.losses.size(), ref.losses.size());
    EXPECT_EQ(0, std::memcmp(r.losses.data(), ref.losses.data(), 4 * ref.losses.size()))
        << recompute_name(rc);
    ASSERT_EQ(r.grads.size(), ref.grads.size());
    int64_t differ = 0;
    for (size_t i = 0; i < ref.grads.size(); ++i)
      if (std::memcmp(&r.grads[i], &ref.grads[i], 4) != 0) ++differ;
    EXPECT_EQ(differ, 0) << recompute_name(rc) << ": gradients not bitwise equal";
    EXPECT_LT(r.arena_bytes, ref.arena_bytes) << recompute_name(rc);
  }
}

// With 16-bit activations the recomputed views are rebuilt by the same
// 16-bit kernels from the same saved 16-bit inputs: bit for bit too.
TEST(Recompute, SixteenBitActivationsEqualNoRecompute) {
  for (Precision p : {Precision::Bf16, Precision::Fp16}) {
    const Result ref = train(Recompute::None, p);
    EXPECT_NE(ref.loss, train(Recompute::None).loss) << precision_name(p);  // not the fp32 run
    for (Recompute rc : {Recompute::Selective, Recompute::Full}) {
      const Result r = train(rc, p);
      const std::string what = std::string(precision_name(p)) + " " + recompute_name(rc);
      EXPECT_EQ(r.loss, ref.loss) << what;
      ASSERT_EQ(r.grads.size(), ref.grads.size());
      EXPECT_EQ(0, std::memcmp(r.grads.data(), ref.grads.data(), 4 * ref.grads.size())) << what;
      EXPECT_LT(r.arena_bytes, ref.arena_bytes) << what;
    }
  }
}

// Pipeline-style: two micro-batches in flight at once share one scratch.
TEST(Recompute, MicroBatchesInFlightMayShareScratch) {
  const GPTConfig m = tiny();
  ParamLayout layout = ParamLayout::build(m, ParallelConfig{}, 0, 0);
  const int64_t N = kB * m.seq_length;
  const Result ref = train(Recompute::None);
  for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full}) {
    GPT model(m, layout, {.recompute = rc});
    model.init(7);
    const ActShape s = model.act_shape(kB, m.seq_length);
    Buffer scratch(activations_scratch_bytes(s) / 4);
    Activations a0, a1;
    activations_init(a0, s, scratch.f32());
    activations_init(a1, s, scratch.f32());
    EXPECT_EQ(a0.bytes(), activations_saved_bytes(s));
    std::vector<int32_t> in0(N), t0(N), in1(N), t1(N);
    batch(in0, t0, 100, m.vocab_size);
    batch(in1, t1, 101, m.vocab_size);
    float loss = model.forward(a0, in0.data(), t0.data());
    loss += model.forward(a1, in1.data(), t1.data());
    model.backward(a1, in1.data(), t1.data(), 1.0f / float(N - 1));
    model.backward(a0, in0.data(), t0.data(), 1.0f / float(N - 1));
    EXPECT_EQ(loss, ref.loss) << recompute_name(rc);
    // Accumulation order differs from train()'s (mb 1 first): equal to rounding.
    for (int64_t i = 0; i < layout.numel(); ++i)
      ASSERT_NEAR(model.grads().f32()[i], ref.grads[size_t(i)],
                  1e-6f + 1e-5f * std::fabs(ref.grads[size_t(i)]))
          << recompute_name(rc) << " element " << i;
  }
}

TEST(Recompute, ActivationBytesPerMode) {
  const GPTConfig m = tiny();
  ParamLayout layout = ParamLayout::build(m, ParallelConfig{}, 0, 0);
  GPT model(m, layout);
  ActShape s = model.act_shape(kB, m.seq_length);
  const int64_t L = s.L, C = s.C, BT = s.N(), Ns = s.Ns(), Cl = s.Cl, F = s.F, V = s.V;
  // Floats. One layer with nothing dropped: ln1, ln2, res_mid, res_out (Ns, C),
  // four LayerNorm stat rows (Ns), qkv + atty (BT, 4 Cl), lse (B, NH, T),
  // fch + fch_gelu (BT, 2F).
  const int64_t layer = 4 * Ns * C + 4 * Ns + 4 * BT * Cl + s.B * s.NH * s.T + 2 * BT * F;
  const int64_t head = Ns * C + 2 * Ns + BT * V + 4 * BT;  // lnf, stats, logits, lse, losses, sums
  const int64_t bwd = Ns * C + BT * C + 4 * BT * Cl + BT * F;  // dresid, dln, dqkv, datty, dfch
  const int64_t dropped = BT * Cl + s.B * s.NH * s.T + BT * F;  // selective: atty, lse, fch_gelu

  s.recompute = Recompute::None;
  const int64_t none = activations_bytes(s);
  EXPECT_EQ(none, 4 * (Ns * C + L * layer + head + bwd));  // today's count, unchanged
  s.recompute = Recompute::Selective;
  const int64_t sel = activations_bytes(s);
  EXPECT_EQ(sel, 4 * (Ns * C + L * (layer - dropped) + dropped + head + bwd));
  s.recompute = Recompute::Full;
  const int64_t full = activations_bytes(s);
  // Full: every layer's input (B, T, C) kept, one layer's worth of scratch,
  // the head and the backward scratch. (The first layer's input is the
  // embeddings; the last layer's output sits in the one layer's res_out slot.)
  EXPECT_EQ(full, 4 * (L * BT * C + layer + head + bwd));
  EXPECT_EQ(activations_saved_bytes(s), 4 * ((L + 1) * Ns * C + head));
  EXPECT_LT(full, sel);
  EXPECT_LT(sel, none);
  for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full}) {
    s.recompute = rc;
    EXPECT_EQ(activations_saved_bytes(s) + activations_scratch_bytes(s), activations_bytes(s));
    Activations a;
    activations_init(a, s);
    EXPECT_EQ(a.bytes(), activations_bytes(s));
  }
}

// 16-bit activations (--bf16 / --fp16): the GEMM activations (ln1, qkv,
// atty, ln2, fch, fch_gelu, lnf) take 2 bytes; the residual stream, the
// statistics, lse, the logits and the backward scratch stay 4. (gpt16's
// 16-bit views are multiples of 32 elements: no rounding either.)
TEST(Recompute, ActivationBytesPerModeIn16Bit) {
  const GPTConfig m = tiny();
  ParamLayout layout = ParamLayout::build(m, ParallelConfig{}, 0, 0);
  GPT model(m, layout, {.precision = Precision::Bf16});
  ActShape s = model.act_shape(kB, m.seq_length);
  ASSERT_TRUE(s.lowp());
  const int64_t L = s.L, C = s.C, BT = s.N(), Ns = s.Ns(), Cl = s.Cl, F = s.F, V = s.V;
  const int64_t lse = s.B * s.NH * s.T;
  // Bytes. One layer: res_mid, res_out, stats, lse in fp32; ln1, ln2, qkv,
  // atty, fch, fch_gelu in 16 bits.
  const int64_t layer = 4 * (2 * Ns * C + 4 * Ns + lse) + 2 * (2 * Ns * C + 4 * BT * Cl + 2 * BT * F);
  const int64_t head = 2 * Ns * C + 4 * (2 * Ns + BT * V + 4 * BT);
  const int64_t bwd = 4 * (Ns * C + BT * C + 4 * BT * Cl + BT * F);
  const int64_t dropped = 2 * BT * Cl + 4 * lse + 2 * BT * F;  // selective: atty, lse, fch_gelu
  const int64_t encoded = 4 * Ns * C;
  s.recompute = Recompute::None;
  const int64_t none = activations_bytes(s);
  EXPECT_EQ(none, encoded + L * layer + head + bwd);
  s.recompute = Recompute::Selective;
  EXPECT_EQ(activations_bytes(s), encoded + L * (layer - dropped) + dropped + head + bwd);
  s.recompute = Recompute::Full;
  EXPECT_EQ(activations_bytes(s), L * 4 * BT * C + layer + head + bwd);
  EXPECT_EQ(activations_saved_bytes(s), (L + 1) * 4 * Ns * C + head);
  // The saved views of a layer with nothing dropped: 16 row-widths of C
  // (gpt16: F = 4C), 64 bytes a token in fp32, 36 here (res_mid and
  // res_out stay fp32).
  ActShape f = s;
  f.recompute = Recompute::None;
  f.precision = Precision::Fp32;
  EXPECT_LT(none, activations_bytes(f));
  for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full}) {
    s.recompute = rc;
    EXPECT_EQ(activations_saved_bytes(s) + activations_scratch_bytes(s), activations_bytes(s));
    Activations a;
    activations_init(a, s);
    EXPECT_EQ(a.bytes(), activations_bytes(s));
    if (rc != Recompute::Full) EXPECT_TRUE(a.layers[0].ln1.lowp());
    EXPECT_TRUE(a.layers[0].fch_gelu.lowp());
    EXPECT_TRUE(a.lnf.lowp());
  }
}

TEST(Recompute, HardwareFlopsAddExactlyTheRecomputedForward) {
  GPTConfig m = tiny();
  m.seq_length = 64;
  const int64_t seqs = 5, T = m.seq_length, C = m.hidden_size;
  const FlopCount none = step_flops(m, seqs, Recompute::None);
  EXPECT_EQ(none.hardware, none.model);
  // Full reruns block_forward: one more forward of every layer.
  const FlopCount full = step_flops(m, seqs, Recompute::Full);
  EXPECT_EQ(full.model, none.model);
  EXPECT_DOUBLE_EQ(full.hardware - full.model,
                   double(seqs) * double(m.num_layers) * layer_forward_flops(m, T));
  // Selective reruns attention_forward (q k^T and p v over T x T, counted in
  // full as Megatron does) and GPT's elementwise GELU (no FLOPs counted): no
  // linear is recomputed.
  const FlopCount sel = step_flops(m, seqs, Recompute::Selective);
  EXPECT_EQ(sel.model, none.model);
  EXPECT_DOUBLE_EQ(sel.hardware - sel.model,
                   double(seqs) * double(m.num_layers) * 2.0 * 2.0 * T * T * C);
}

TEST(Recompute, ParseAndName) {
  for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full})
    EXPECT_EQ(recompute_parse(recompute_name(rc)), rc);
  EXPECT_TRUE(test::throws_error_with([] { recompute_parse("partial"); },
                                      {"--recompute-granularity", "partial"}));
}

}  // namespace
}  // namespace tessera

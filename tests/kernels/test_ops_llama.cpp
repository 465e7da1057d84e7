// kernels::Ops for the Llama family's kernels: rmsnorm, swiglu, attention
// with AttentionHeads (GQA, RoPE) and its decode run the raw kernel of the
// views' precision (fp32, or bf16 / fp16 under a low-precision state) and
// charge their time to the block's kinds (RMSNorm: "layernorm", SwiGLU:
// "gelu", attention and rope_rows: "attention"); the (C, NH) attention
// forms are the MHA heads.
#include <gtest/gtest.h>

#include <vector>

#include "kernel_test_util.h"
#include "tessera/core/error.h"
#include "tessera/kernels/cpu/attention.h"
#include "tessera/kernels/cpu/cast.h"
#include "tessera/kernels/cpu/cpu_backend.h"
#include "tessera/kernels/cpu/rmsnorm.h"
#include "tessera/kernels/cpu/rope.h"
#include "tessera/kernels/cpu/swiglu.h"
#include "tessera/kernels/ops.h"

using namespace tessera;

namespace {

void expect_charged_only(const Profile& p, Op kind) {
  EXPECT_GT(p[kind], 0.0) << op_name(kind);
  for (size_t i = 0; i < size_t(Op::kCount); ++i)
    if (Op(i) != kind) EXPECT_EQ(p.seconds[i], 0.0) << op_name(Op(i));
}

std::vector<uint16_t> bf16_of(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  cpu::cast_fp32_to_bf16(out.data(), x.data(), int64_t(x.size()));
  return out;
}

TEST(KernelOpsLlama, RmsNormIsTheRawKernelChargedToLayerNorm) {
  const int64_t N = 32, C = 96;
  const auto x = test::randn(N * C, 1), w = test::randn(C, 2), dy = test::randn(N * C, 3);
  std::vector<float> raw(N * C), via(N * C), r1(N), r2(N);  // (N, C) (N, C) (N) (N)
  cpu::rmsnorm_forward(raw.data(), r1.data(), x.data(), w.data(), N, C, 1e-6f);
  Profile p;
  const kernels::Ops ops(kernels::cpu_backend(), &p);
  ops.rmsnorm_forward(via.data(), r2.data(), x.data(), w.data(), N, C, 1e-6f);
  EXPECT_EQ(raw, via);
  EXPECT_EQ(r1, r2);
  std::vector<float> dx1(N * C, 1.0f), dw1(C, 2.0f), dx2 = dx1, dw2 = dw1;
  cpu::rmsnorm_backward(dx1.data(), dw1.data(), dy.data(), x.data(), w.data(), r1.data(), N, C);
  ops.rmsnorm_backward(dx2.data(), dw2.data(), dy.data(), x.data(), w.data(), r1.data(), N, C);
  EXPECT_EQ(dx1, dx2);
  EXPECT_EQ(dw1, dw2);
  expect_charged_only(p, Op::LayerNorm);

  // A 16-bit output view under --bf16 runs the bf16 kernel.
  kernels::LowPrecision lp;
  lp.precision = Precision::Bf16;
  std::vector<uint16_t> want(N * C), got(N * C);
  cpu::rmsnorm_forward_bf16(want.data(), r1.data(), x.data(), w.data(), N, C, 1e-6f);
  kernels::Ops(kernels::cpu_backend(), nullptr, &lp)
      .rmsnorm_forward(kernels::Act(got.data(), Precision::Bf16), r2.data(), x.data(), w.data(), N, C, 1e-6f);
  EXPECT_EQ(want, got);
}

TEST(KernelOpsLlama, SwiGluIsTheRawKernelChargedToGelu) {
  const int64_t N = 16, F = 40;
  const auto h = test::randn(N * 2 * F, 4), dy = test::randn(N * F, 5);
  std::vector<float> raw(N * F), via(N * F), d1(N * 2 * F), d2(N * 2 * F);
  cpu::swiglu_forward(raw.data(), h.data(), N, F);
  cpu::swiglu_backward(d1.data(), h.data(), dy.data(), N, F);
  Profile p;
  const kernels::Ops ops(kernels::cpu_backend(), &p);
  ops.swiglu_forward(via.data(), h.data(), N, F);
  ops.swiglu_backward(d2.data(), h.data(), dy.data(), N, F);
  EXPECT_EQ(raw, via);
  EXPECT_EQ(d1, d2);
  expect_charged_only(p, Op::Gelu);

  kernels::LowPrecision lp;
  lp.precision = Precision::Fp16;
  std::vector<uint16_t> hh(h.size());
  cpu::cast_fp32_to_fp16(hh.data(), h.data(), int64_t(h.size()));
  std::vector<uint16_t> o1(N * F), o2(N * F), g1(N * 2 * F), g2(N * 2 * F);
  cpu::swiglu_forward_fp16(o1.data(), hh.data(), N, F);
  cpu::swiglu_backward_fp16(g1.data(), hh.data(), dy.data(), N, F);
  const kernels::Ops lops(kernels::cpu_backend(), nullptr, &lp);
  lops.swiglu_forward(kernels::Act(o2.data(), Precision::Fp16), kernels::Act(hh.data(), Precision::Fp16), N,
                      F);
  lops.swiglu_backward(kernels::Act(g2.data(), Precision::Fp16), kernels::Act(hh.data(), Precision::Fp16),
                       dy.data(), N,
                       F);
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(g1, g2);
  // Mixed views are refused.
  EXPECT_THROW(lops.swiglu_forward(kernels::Act(o2.data(), Precision::Fp16), h.data(), N, F),
               Error);
}

TEST(KernelOpsLlama, AttentionHeadsReachTheKernel) {
  const int64_t B = 2, T = 70;
  const AttentionHeads hd{4, 2, 16, 10000.0f};
  const int64_t W = hd.qkv_width(), C = hd.q_width();
  const auto qkv = test::randn(B * T * W, 6), dout = test::randn(B * T * C, 7);
  std::vector<float> o1(B * T * C), o2(B * T * C), l1(B * 4 * T), l2(B * 4 * T);
  std::vector<float> d1(B * T * W), d2(B * T * W);
  cpu::attention_forward(o1.data(), l1.data(), qkv.data(), B, T, hd);
  cpu::attention_backward(d1.data(), dout.data(), qkv.data(), o1.data(), l1.data(), B, T, hd);
  Profile p;
  const kernels::Ops ops(kernels::cpu_backend(), &p);
  ops.attention_forward(o2.data(), l2.data(), qkv.data(), B, T, hd);
  ops.attention_backward(d2.data(), dout.data(), qkv.data(), o2.data(), l2.data(), B, T, hd);
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(l1, l2);
  EXPECT_EQ(d1, d2);
  expect_charged_only(p, Op::Attention);

  // bf16 views run the bf16 kernel with the same heads.
  kernels::LowPrecision lp;
  lp.precision = Precision::Bf16;
  const auto qb = bf16_of(qkv);
  std::vector<uint16_t> ob1(B * T * C), ob2(B * T * C);
  cpu::attention_forward_bf16(ob1.data(), l1.data(), qb.data(), B, T, hd);
  kernels::Ops(kernels::cpu_backend(), nullptr, &lp)
      .attention_forward(kernels::Act(ob2.data(), Precision::Bf16), l2.data(),
                         kernels::ConstAct(qb.data(), Precision::Bf16), B, T, hd);
  EXPECT_EQ(ob1, ob2);
  EXPECT_EQ(l1, l2);
}

TEST(KernelOpsLlama, MhaFormIsTheHeadsFormAndChecksTheWidth) {
  const int64_t B = 1, T = 20, C = 64, NH = 4;
  const auto qkv = test::randn(B * T * 3 * C, 8);
  std::vector<float> o1(B * T * C), o2(B * T * C), l1(NH * T), l2(NH * T);
  const kernels::Ops ops(kernels::cpu_backend(), nullptr);
  ops.attention_forward(o1.data(), l1.data(), qkv.data(), B, T, C, NH);
  ops.attention_forward(o2.data(), l2.data(), qkv.data(), B, T, AttentionHeads::mha(C, NH));
  EXPECT_EQ(o1, o2);
  EXPECT_THROW(ops.attention_forward(o1.data(), l1.data(), qkv.data(), B, T, C, 3), Error);
}

TEST(KernelOpsLlama, DecodeAndRopeRowsChargeAttention) {
  const AttentionHeads hd{4, 2, 16, 500.0f};
  const int64_t len = 9, KVW = hd.kv_width();
  auto kc = test::randn(len * KVW, 9);
  const auto vc = test::randn(len * KVW, 10), q = test::randn(hd.q_width(), 11);
  auto kc2 = kc;
  cpu::rope_rows(kc.data(), len, KVW, hd.kv_heads, hd.head_size, 0, hd.rope_base);
  std::vector<float> o1(hd.q_width()), o2(hd.q_width());
  cpu::attention_decode(o1.data(), q.data(), kc.data(), vc.data(), len, hd);
  Profile p;
  const kernels::Ops ops(kernels::cpu_backend(), &p);
  ops.rope_rows(kc2.data(), len, KVW, hd.kv_heads, hd.head_size, 0, hd.rope_base);
  ops.attention_decode(o2.data(), q.data(), kc2.data(), vc.data(), len, hd);
  EXPECT_EQ(kc, kc2);
  EXPECT_EQ(o1, o2);
  expect_charged_only(p, Op::Attention);
}

}  // namespace

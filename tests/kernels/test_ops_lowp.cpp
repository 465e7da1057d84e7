// kernels::Ops with a low-precision state (--bf16 / --fp16): a matmul casts
// its activation operand (and, in backward, the output gradient) into the
// scratch, reads the weight from the working copy when it is there (and
// casts it when it is not), runs the backend's 16-bit GEMM, and charges the
// casts to Op::Cast and the GEMM to Op::Gemm; an inactive state is fp32.
#include <gtest/gtest.h>

#include <vector>

#include "kernel_test_util.h"
#include "tessera/kernels/cpu/cast.h"
#include "tessera/kernels/cpu/cpu_backend.h"
#include "tessera/kernels/cpu/matmul.h"
#include "tessera/kernels/cpu/matmul_lowp.h"
#include "tessera/kernels/ops.h"

using namespace tessera;

namespace {

constexpr int64_t N = 32, C = 48, OC = 40;

std::vector<uint16_t> bf16_of(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  cpu::cast_fp32_to_bf16(out.data(), x.data(), int64_t(x.size()));
  return out;
}

TEST(KernelOpsLowp, ForwardUsesTheWorkingCopyAndCastsTheInput) {
  const auto x = test::randn(N * C, 1), w = test::randn(OC * C, 2), b = test::randn(OC, 3);
  // A working copy that is not w (2 w, exact in bf16): proves it is the one read.
  std::vector<float> w2(w.size());
  for (size_t i = 0; i < w.size(); ++i) w2[i] = 2 * w[i];
  const auto xb = bf16_of(x), w2b = bf16_of(w2);
  std::vector<float> want(N * OC), got(N * OC);
  cpu::matmul_forward_bf16(want.data(), xb.data(), w2b.data(), b.data(), N, C, OC);
  kernels::LowPrecision lp;
  lp.precision = Precision::Bf16;
  lp.bind(w.data(), int64_t(w.size()), w2b.data());
  Profile prof;
  kernels::Ops(kernels::cpu_backend(), &prof, &lp)
      .matmul_forward(got.data(), x.data(), w.data(), b.data(), N, C, OC);
  EXPECT_EQ(want, got);
  EXPECT_GT(prof[Op::Gemm], 0.0);
  EXPECT_GT(prof[Op::Cast], 0.0);
  for (Op op : {Op::Attention, Op::LayerNorm, Op::Residual, Op::Loss}) EXPECT_EQ(prof[op], 0.0);
}

TEST(KernelOpsLowp, BackwardCastsDoutAndInputAndCastsAWeightOutsideTheCopy) {
  const auto x = test::randn(N * C, 1), w = test::randn(OC * C, 2), dy = test::randn(N * OC, 4);
  const auto xb = bf16_of(x), wb = bf16_of(w), dyb = bf16_of(dy);
  std::vector<float> dx0(N * C), dw0(OC * C, 0.5f), db0(OC, 0.25f);
  std::vector<float> dx1 = dx0, dw1 = dw0, db1 = db0;
  cpu::matmul_backward_bf16(dx0.data(), dw0.data(), db0.data(), dyb.data(), xb.data(), wb.data(),
                            N, C, OC, false);
  kernels::LowPrecision lp;  // no working copy bound: the weight is cast on the way
  lp.precision = Precision::Bf16;
  kernels::Ops(kernels::cpu_backend(), nullptr, &lp)
      .matmul_backward(dx1.data(), dw1.data(), db1.data(), dy.data(), x.data(), w.data(), N, C,
                       OC);
  EXPECT_EQ(dx0, dx1);
  EXPECT_EQ(dw0, dw1);
  EXPECT_EQ(db0, db1);
}

TEST(KernelOpsLowp, Fp16RunsTheFp16Gemm) {
  const auto x = test::randn(N * C, 1), w = test::randn(OC * C, 2);
  std::vector<uint16_t> xh(x.size()), wh(w.size());
  cpu::cast_fp32_to_fp16(xh.data(), x.data(), int64_t(x.size()));
  cpu::cast_fp32_to_fp16(wh.data(), w.data(), int64_t(w.size()));
  std::vector<float> want(N * OC), got(N * OC);
  cpu::matmul_forward_fp16(want.data(), xh.data(), wh.data(), nullptr, N, C, OC);
  kernels::LowPrecision lp;
  lp.precision = Precision::Fp16;
  lp.bind(w.data(), int64_t(w.size()), wh.data());
  kernels::Ops(kernels::cpu_backend(), nullptr, &lp)
      .matmul_forward(got.data(), x.data(), w.data(), nullptr, N, C, OC);
  EXPECT_EQ(want, got);
}

TEST(KernelOpsLowp, InactiveStateIsTheFp32Kernel) {
  const auto x = test::randn(N * C, 1), w = test::randn(OC * C, 2);
  std::vector<float> want(N * OC), got(N * OC);
  cpu::matmul_forward(want.data(), x.data(), w.data(), nullptr, N, C, OC);
  kernels::LowPrecision lp;  // fp32
  Profile prof;
  kernels::Ops(kernels::cpu_backend(), &prof, &lp)
      .matmul_forward(got.data(), x.data(), w.data(), nullptr, N, C, OC);
  EXPECT_EQ(want, got);
  EXPECT_EQ(prof[Op::Cast], 0.0);
}

TEST(KernelOpsLowp, BindDropsRangesItOverlaps) {
  std::vector<float> buf(100);
  std::vector<uint16_t> a(100), b(50);
  kernels::LowPrecision lp;
  lp.precision = Precision::Bf16;
  lp.bind(buf.data(), 100, a.data());
  EXPECT_EQ(lp.find(buf.data() + 70), a.data() + 70);
  lp.bind(buf.data() + 50, 50, b.data());  // a stale range over the same memory goes
  EXPECT_EQ(lp.find(buf.data() + 70), b.data() + 20);
  EXPECT_EQ(lp.find(buf.data() + 10), nullptr);
  EXPECT_EQ(lp.ranges.size(), 1u);
}

}  // namespace

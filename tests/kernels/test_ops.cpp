// kernels::Ops over the CPU backend: each call gives the raw kernel's result
// bit for bit and charges its time to its own kind of work, and only there.
#include <gtest/gtest.h>

#include <vector>

#include "kernel_test_util.h"
#include "tessera/kernels/cpu/cpu_backend.h"
#include "tessera/kernels/cpu/gelu.h"
#include "tessera/kernels/cpu/layernorm.h"
#include "tessera/kernels/cpu/matmul.h"
#include "tessera/kernels/ops.h"

using namespace tessera;

namespace {

// Every kind but `op` is still zero, and `op` got some time.
void expect_charged_only(const Profile& p, Op op) {
  for (size_t k = 0; k < size_t(Op::kCount); ++k) {
    if (Op(k) == op)
      EXPECT_GT(p.seconds[k], 0.0) << op_name(Op(k));
    else
      EXPECT_EQ(p.seconds[k], 0.0) << op_name(Op(k));
  }
}

TEST(KernelOps, MatmulIsTheRawKernelChargedToGemm) {
  const int64_t N = 64, C = 48, OC = 80;
  const auto x = test::randn(N * C, 1), w = test::randn(OC * C, 2), b = test::randn(OC, 3);
  std::vector<float> raw(N * OC), via(N * OC);  // (N, OC) each
  cpu::matmul_forward(raw.data(), x.data(), w.data(), b.data(), N, C, OC);
  Profile prof;
  kernels::Ops(kernels::cpu_backend(), &prof)
      .matmul_forward(via.data(), x.data(), w.data(), b.data(), N, C, OC);
  EXPECT_EQ(raw, via);
  expect_charged_only(prof, Op::Gemm);
}

TEST(KernelOps, LayerNormAndGeluChargeTheirOwnKinds) {
  const int64_t N = 32, C = 96;
  const auto x = test::randn(N * C, 4), w = test::randn(C, 5), b = test::randn(C, 6);
  std::vector<float> raw(N * C), via(N * C), mean(N), rstd(N);  // (N, C) (N, C) (N) (N)
  cpu::layernorm_forward(raw.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  Profile ln;
  kernels::Ops(kernels::cpu_backend(), &ln)
      .layernorm_forward(via.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  EXPECT_EQ(raw, via);
  expect_charged_only(ln, Op::LayerNorm);

  cpu::gelu_forward(raw.data(), x.data(), N * C);
  Profile gelu;
  kernels::Ops(kernels::cpu_backend(), &gelu).gelu_forward(via.data(), x.data(), N * C);
  EXPECT_EQ(raw, via);
  expect_charged_only(gelu, Op::Gelu);
}

TEST(KernelOps, ANullProfileRecordsNothingAndStillRuns) {
  const auto a = test::randn(100, 7), b = test::randn(100, 8);
  std::vector<float> out = a;  // (100) a, then += b
  const kernels::Ops ops(kernels::cpu_backend(), nullptr);
  EXPECT_EQ(ops.profile(), nullptr);
  ops.accumulate(out.data(), b.data(), 100);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], a[i] + b[i]);
  EXPECT_STREQ(ops.backend().name(), "cpu");
}

}  // namespace

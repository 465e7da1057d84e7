// The fused memory-bound kernels of issue 37 against the unfused pairs they
// replace, called in turn in the same run (so a noisy shared machine slows
// both alike), at GPT-2 124M's widths: rows = B * T of 256 (B 4, T 64) and
// 2048 (B 8, T 256).
//   - residual + LayerNorm: add (res += x) then layernorm_forward, against
//     residual_layernorm_forward (one sweep of the residual stream);
//   - fc bias + GELU (fp32): bias_add then gelu_forward, against
//     bias_gelu_forward (one sweep of the pre-activation).
// Each pair gives the same bits (tests/kernels/test_layernorm, test_gelu);
// this prints the median time of each and the ratio fused / unfused.
//
//   OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive build/bench/bench_fused_kernels [repeats=101]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tessera/kernels/cpu/bias.h"
#include "tessera/kernels/cpu/elementwise.h"
#include "tessera/kernels/cpu/gelu.h"
#include "tessera/kernels/cpu/layernorm.h"

using namespace tessera;

namespace {

// Median seconds of a and of b over `repeats` rounds, a and b alternated.
template <typename A, typename B>
void alternate(int repeats, A a, B b, double& ta, double& tb) {
  std::vector<double> sa, sb;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    a();
    auto t1 = std::chrono::steady_clock::now();
    b();
    auto t2 = std::chrono::steady_clock::now();
    sa.push_back(std::chrono::duration<double>(t1 - t0).count());
    sb.push_back(std::chrono::duration<double>(t2 - t1).count());
  }
  std::sort(sa.begin(), sa.end());
  std::sort(sb.begin(), sb.end());
  ta = sa[sa.size() / 2];
  tb = sb[sb.size() / 2];
}

void report(const char* what, int64_t rows, double unfused, double fused) {
  std::printf("%-22s rows %5lld | unfused %8.1f us | fused %8.1f us | fused / unfused %.2f\n", what,
              static_cast<long long>(rows), unfused * 1e6, fused * 1e6, fused / unfused);
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 101;
  const int64_t C = 768, F = 4 * C;
  for (const int64_t rows : {int64_t(256), int64_t(2048)}) {
    // residual + LayerNorm: res (rows, C) += x (rows, C); ln (rows, C) of it
    std::vector<float> res(size_t(rows * C), 0.5f), x(size_t(rows * C), 0.25f);
    std::vector<float> ln(size_t(rows * C)), w(size_t(C), 1.0f), b(size_t(C), 0.0f);
    std::vector<float> mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));  // (rows)
    double tu = 0, tf = 0;
    alternate(
        repeats,
        [&] {
          cpu::add(res.data(), res.data(), x.data(), rows * C);
          cpu::layernorm_forward(ln.data(), mean.data(), rstd.data(), res.data(), w.data(),
                                 b.data(), rows, C);
        },
        [&] {
          cpu::residual_layernorm_forward(ln.data(), mean.data(), rstd.data(), res.data(),
                                          x.data(), w.data(), b.data(), rows, C);
        },
        tu, tf);
    report("residual + layernorm", rows, tu, tf);
    // bias + GELU: pre (rows, F) += bias (F); act (rows, F) = gelu(pre)
    std::vector<float> pre(size_t(rows * F), 0.1f), act(size_t(rows * F)), bias(size_t(F), 0.0f);
    alternate(
        repeats,
        [&] {
          cpu::bias_add(pre.data(), bias.data(), rows, F);
          cpu::gelu_forward(act.data(), pre.data(), rows * F);
        },
        [&] { cpu::bias_gelu_forward(act.data(), pre.data(), bias.data(), rows, F); }, tu, tf);
    report("fc bias + gelu (fp32)", rows, tu, tf);
  }
  return 0;
}

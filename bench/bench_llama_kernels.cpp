// The Llama family's kernels against GPT-2's on a GPT-2-small-like shape
// (C = 768, 12 heads of 64, T = 1024): RMSNorm vs LayerNorm, SwiGLU (F =
// 2048, Megatron's 4C*2/3) vs GELU (4C = 3072), and attention with GQA
// (4 kv heads) and RoPE vs plain multi-head attention, each forward +
// backward, median of the repeats. A Llama model is meant to run within
// 10 % of a GPT model of equal FLOPs per token, so these should cost what
// their GPT-2 counterparts do.
// Usage: bench_llama_kernels [repeats] [B]   (OMP_NUM_THREADS sets the threads)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <utility>
#include <vector>

#include "tessera/core/rng.h"
#include "tessera/kernels/cpu/attention.h"
#include "tessera/kernels/cpu/gelu.h"
#include "tessera/kernels/cpu/layernorm.h"
#include "tessera/kernels/cpu/rmsnorm.h"
#include "tessera/kernels/cpu/swiglu.h"

using namespace tessera;

namespace {

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Medians of a (the GPT-2 kernel) and b (the Llama one), timed alternately
// so both see the same machine load (the shared machine is rarely idle).
std::pair<double, double> median_pair(int repeats, const std::function<void()>& a,
                                      const std::function<void()>& b) {
  a(), b();  // warm-up: page faults, the RoPE table
  std::vector<double> ta, tb;
  for (int r = 0; r < repeats; ++r) {
    ta.push_back(seconds_of(a));
    tb.push_back(seconds_of(b));
  }
  std::sort(ta.begin(), ta.end());
  std::sort(tb.begin(), tb.end());
  return {ta[ta.size() / 2], tb[tb.size() / 2]};
}

std::vector<float> randn(int64_t n, uint64_t seed) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i++) x[size_t(i)] = rng_normal(seed, 0, uint64_t(i));
  return x;
}

void report(const char* what, double base, const char* base_name, double t) {
  std::printf("  %-34s %9.3f ms   %-10s %9.3f ms   ratio %.3f\n", what, t * 1e3, base_name,
              base * 1e3, t / base);
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 11;
  const int64_t B = argc > 2 ? std::atoi(argv[2]) : 2;
  const int64_t T = 1024, C = 768, NH = 12, HS = 64, KVH = 4, N = B * T;
  const int64_t F_gelu = 4 * C, F_swiglu = 4 * C * 2 / 3 / 64 * 64;
  std::printf("B %lld, T %lld, C %lld, %lld heads of %lld (GQA: %lld kv heads), repeats %d\n",
              (long long)B, (long long)T, (long long)C, (long long)NH, (long long)HS,
              (long long)KVH, repeats);

  // ---- norms: forward + backward over (N, C) ----
  {
    const auto x = randn(N * C, 1), w = randn(C, 2), b = randn(C, 3), dy = randn(N * C, 4);
    std::vector<float> y(N * C), mean(N), rstd(N), dx(N * C), dw(C), db(C);
    const auto [ln, rms] = median_pair(
        repeats * 5,
        [&] {
          cpu::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(),
                                 N, C);
          cpu::layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(),
                                  mean.data(), rstd.data(), N, C);
        },
        [&] {
          cpu::rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
          cpu::rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(),
                                N, C);
        });
    report("rmsnorm fwd+bwd (N, C)", ln, "layernorm", rms);
  }
  // ---- MLP activations: forward + backward ----
  {
    const auto h = randn(N * 2 * F_swiglu, 5), dy = randn(N * F_gelu, 6);
    std::vector<float> y(N * F_gelu), dh(N * 2 * F_swiglu);
    const auto [gelu, sw] = median_pair(
        repeats * 5,
        [&] {
          cpu::gelu_forward(y.data(), h.data(), N * F_gelu);
          cpu::gelu_backward(dh.data(), h.data(), dy.data(), N * F_gelu);
        },
        [&] {
          cpu::swiglu_forward(y.data(), h.data(), N, F_swiglu);
          cpu::swiglu_backward(dh.data(), h.data(), dy.data(), N, F_swiglu);
        });
    report("swiglu fwd+bwd (N, 2F=4096)", gelu, "gelu 4C", sw);
  }
  // ---- attention: forward + backward ----
  {
    const AttentionHeads mha{NH, NH, HS, 0.0f};
    const AttentionHeads variants[] = {{NH, NH, HS, 10000.0f}, {NH, KVH, HS, 0.0f},
                                       {NH, KVH, HS, 10000.0f}};
    const char* names[] = {"attention MHA + RoPE", "attention GQA 12/4", "attention GQA 12/4 + RoPE"};
    const auto qkv = randn(N * 3 * C, 7), dout = randn(N * C, 8);
    std::vector<float> out(N * C), lse(B * NH * T), dqkv(N * 3 * C);
    auto step = [&](const AttentionHeads& hd) {
      return [&, hd] {
        cpu::attention_forward(out.data(), lse.data(), qkv.data(), B, T, hd);
        cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B,
                                T, hd);
      };
    };
    for (int v = 0; v < 3; v++) {
      const auto [base, t] = median_pair(repeats, step(mha), step(variants[v]));
      report(names[v], base, "MHA", t);
    }
  }
  return 0;
}

// The flash attention kernels (kernels/cpu/attention.h) against the machine's
// fp32 GEMM rate, measured in the same run: issue 37 asks attention's share
// of a step to stay at its FLOP share, and its tiles are fp32 matmuls (16-bit
// storage is widened on loading), so the fp32 sgemm peak is their ceiling.
//
// GFLOP/s here count the work a causal kernel has to do: each (query, key)
// pair with key <= query costs 2 HS FLOPs per matmul; forward has two (Q K^T,
// P V), backward five (the scores recomputed, dV, dP, dQ, dK). The metrics'
// convention (model/flops.cpp: the full T x T) is twice this.
//
//   OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive build/bench/bench_attention [repeats=21] [shapes=all|small]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "tessera/kernels/cpu/attention.h"
#include "tessera/kernels/cpu/cast.h"
#include "tessera/train/peak.h"

using namespace tessera;

namespace {

struct Shape {
  int64_t B, T;
};

// Median seconds of f over `repeats` calls, after one untimed call.
template <typename F>
double median_seconds(int repeats, F f) {
  f();
  std::vector<double> s;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

// Causal (query, key) pairs of all heads and sequences.
double causal_pairs(const Shape& s, int64_t NH) {
  return double(s.B) * double(NH) * double(s.T) * double(s.T + 1) / 2.0;
}

void report(const char* prec, const char* pass, const Shape& s, double seconds, double flops,
            double peak_gflops) {
  const double gflops = flops / seconds / 1e9;
  std::printf("%-4s %-8s B %2lld T %5lld | %9.1f us | %6.1f GFLOP/s | %4.0f%% of fp32 GEMM peak\n",
              prec, pass, static_cast<long long>(s.B), static_cast<long long>(s.T), seconds * 1e6,
              gflops, 100.0 * gflops / peak_gflops);
}

// Forward and backward of one storage type St (float, bf16_t).
template <typename St, typename Fwd, typename Bwd>
void run_shape(const char* prec, const Shape& s, int64_t C, int64_t NH, int repeats,
               double peak_gflops, Fwd fwd, Bwd bwd) {
  const int64_t HS = C / NH, rows = s.B * s.T;
  std::vector<St> qkv(size_t(rows * 3 * C)), out(size_t(rows * C)), dqkv(size_t(rows * 3 * C));
  std::vector<float> lse(size_t(s.B * NH * s.T)), dout(size_t(rows * C));  // (B, NH, T), (B, T, C)
  // Scores of a few units, as trained models have: a deterministic pattern
  // that keeps the softmax away from a one-hot row.
  std::vector<float> qkv32(qkv.size());  // (B, T, 3C)
  for (size_t i = 0; i < qkv.size(); ++i)
    qkv32[i] = 0.25f * float(int(i * 2654435761u % 17) - 8) / 8.0f;
  if constexpr (std::is_same_v<St, float>)
    qkv = qkv32;
  else
    cpu::cast_fp32_to_bf16(qkv.data(), qkv32.data(), int64_t(qkv.size()));
  for (size_t i = 0; i < dout.size(); ++i) dout[i] = 0.01f * float(int(i % 13) - 6);
  const double pairs = causal_pairs(s, NH);
  const double tf = median_seconds(repeats, [&] { fwd(out.data(), lse.data(), qkv.data(), s.B, s.T, C, NH); });
  report(prec, "forward", s, tf, 4.0 * pairs * double(HS), peak_gflops);
  const double tb = median_seconds(repeats, [&] {
    bwd(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), s.B, s.T, C, NH);
  });
  report(prec, "backward", s, tb, 10.0 * pairs * double(HS), peak_gflops);
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 21;
  const bool small = argc > 2 && std::strcmp(argv[2], "small") == 0;
  const int64_t C = 768, NH = 12;  // GPT-2 124M's heads: 12 of 64
  std::vector<Shape> shapes = {{4, 64}, {8, 256}, {2, 1024}};
  if (small) shapes = {{1, 64}};
  const double peak_before = measure_gemm_peak(false) * 1e3;  // GFLOP/s
  std::printf("fp32 GEMM peak (this run, before the kernels): %.1f GFLOP/s\n", peak_before);
  for (const Shape& s : shapes) {
    run_shape<float>(
        "fp32", s, C, NH, repeats, peak_before,
        [](float* o, float* l, const float* q, int64_t B, int64_t T, int64_t C_, int64_t NH_) {
          cpu::attention_forward(o, l, q, B, T, C_, NH_);
        },
        [](float* dq, const float* d, const float* q, const float* o, const float* l, int64_t B,
           int64_t T, int64_t C_, int64_t NH_) {
          cpu::attention_backward(dq, d, q, o, l, B, T, C_, NH_);
        });
    run_shape<bf16_t>(
        "bf16", s, C, NH, repeats, peak_before,
        [](bf16_t* o, float* l, const bf16_t* q, int64_t B, int64_t T, int64_t C_, int64_t NH_) {
          cpu::attention_forward_bf16(o, l, q, B, T, C_, NH_);
        },
        [](bf16_t* dq, const float* d, const bf16_t* q, const bf16_t* o, const float* l,
           int64_t B, int64_t T, int64_t C_, int64_t NH_) {
          cpu::attention_backward_bf16(dq, d, q, o, l, B, T, C_, NH_);
        });
  }
  std::printf("fp32 GEMM peak (this run, after the kernels): %.1f GFLOP/s\n",
              measure_gemm_peak(false) * 1e3);
  return 0;
}

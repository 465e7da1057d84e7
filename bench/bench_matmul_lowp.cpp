// GFLOP/s of a linear layer's GEMMs in fp32 (kernels/cpu/matmul.h) against
// bf16 and fp16 (kernels/cpu/matmul_lowp.h) at GPT-2 124M's shapes: 256
// rows (micro-batch 4 x seq 64), in/out features from {768, 2304, 3072}.
//
//   OMP_NUM_THREADS=2 build/bench/bench_matmul_lowp [samples=21]
//
// The variants are called in turn, one call each per round, so a noisy
// shared machine slows all of them alike; each reports its median call.
// Forward: out = inp @ W^T + b (2*M*K*N flops). Backward: dinp and dweight
// (+dbias) (4*M*K*N flops).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "tessera/kernels/cpu/cast.h"
#include "tessera/kernels/cpu/matmul.h"
#include "tessera/kernels/cpu/matmul_lowp.h"
#include "tessera/kernels/cpu/matmul_lowp_primitive.h"

namespace {

using namespace tessera;
using namespace tessera::cpu;

struct Layer { const char* name; int64_t C, OC; };
// GPT-2 124M's four linears (C = 768, 4C = 3072, 3C = 2304).
const Layer kLayers[] = {{"qkv", 768, 2304}, {"attnproj", 768, 768},
                         {"fc", 768, 3072}, {"fcproj", 3072, 768}};
constexpr int64_t kRows = 256;

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Timing {
  double median = 0, best = 0;  // seconds per call
};

// Each variant called in turn `samples` times after two warm-up rounds
// (primitive creation, page faults). The median is what a loaded machine
// gives; the best call estimates the kernel when it had both cores.
std::vector<Timing> time_in_turn(const std::vector<std::function<void()>>& fs, int samples) {
  std::vector<std::vector<double>> t(fs.size());
  for (int s = -2; s < samples; s++)
    for (size_t i = 0; i < fs.size(); i++) {
      const double dt = seconds_of(fs[i]);
      if (s >= 0) t[i].push_back(dt);
    }
  std::vector<Timing> out;
  for (auto& v : t) out.push_back({median(v), *std::min_element(v.begin(), v.end())});
  return out;
}

// One table row: GFLOP/s (median / best) of each variant (fp32, bf16, bf16
// out, fp16; a zero Timing leaves its column blank); `vs` is the variant the
// ratio column compares fp32 with.
void print_row(const char* layer, const char* pass, double gflop, const std::vector<Timing>& t,
               size_t vs) {
  std::printf("%-9s %-7s", layer, pass);
  for (const Timing& x : t) {
    if (x.median > 0) std::printf(" | %6.1f /%6.1f", gflop / x.median, gflop / x.best);
    else std::printf(" | %15s", "");  // a variant this pass does not have
  }
  for (size_t i = t.size(); i < 4; i++) std::printf(" | %15s", "");
  std::printf(" | x%.2f / x%.2f\n", t[0].median / t[vs].median, t[0].best / t[vs].best);
}

void bench_layer(const Layer& l, int samples) {
  const int64_t N = kRows, C = l.C, OC = l.OC;
  std::vector<float> inp(N * C), w(OC * C), bias(OC), dout(N * OC);  // fp32 operands
  for (size_t i = 0; i < inp.size(); i++) inp[i] = float(i % 13) * 0.01f - 0.06f;
  for (size_t i = 0; i < w.size(); i++) w[i] = float(i % 7) * 0.01f - 0.03f;
  for (size_t i = 0; i < dout.size(); i++) dout[i] = float(i % 5) * 0.01f - 0.02f;
  std::vector<uint16_t> inp16(N * C), w16(OC * C), dout16(N * OC), out16(N * OC);  // bf16
  std::vector<uint16_t> inph(N * C), wh(OC * C), douth(N * OC);                    // fp16
  cast_fp32_to_bf16(inp16.data(), inp.data(), N * C);
  cast_fp32_to_bf16(w16.data(), w.data(), OC * C);
  cast_fp32_to_bf16(dout16.data(), dout.data(), N * OC);
  cast_fp32_to_fp16(inph.data(), inp.data(), N * C);
  cast_fp32_to_fp16(wh.data(), w.data(), OC * C);
  cast_fp32_to_fp16(douth.data(), dout.data(), N * OC);
  std::vector<float> out(N * OC), dinp(N * C), dw(OC * C), db(OC);  // fp32 results

  const std::vector<std::function<void()>> fwd = {
      [&] { matmul_forward(out.data(), inp.data(), w.data(), bias.data(), N, C, OC); },
      [&] { matmul_forward_bf16(out.data(), inp16.data(), w16.data(), bias.data(), N, C, OC); },
      [&] { matmul_forward_bf16_out(out16.data(), inp16.data(), w16.data(), bias.data(), N, C, OC); },
      [&] { matmul_forward_fp16(out.data(), inph.data(), wh.data(), bias.data(), N, C, OC); }};
  const std::vector<std::function<void()>> bwd = {
      [&] { matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(),
                            N, C, OC, false); },
      [&] { matmul_backward_bf16(dinp.data(), dw.data(), db.data(), dout16.data(), inp16.data(),
                                 w16.data(), N, C, OC, false); },
      [&] { matmul_backward_fp16(dinp.data(), dw.data(), db.data(), douth.data(), inph.data(),
                                 wh.data(), N, C, OC, false); }};
  // dweight alone (dinp null, no bias): the GEMM that reads dout transposed.
  const std::vector<std::function<void()>> dweight = {
      [&] { matmul_backward(nullptr, dw.data(), nullptr, dout.data(), inp.data(), w.data(),
                            N, C, OC, false); },
      [&] { matmul_backward_bf16(nullptr, dw.data(), nullptr, dout16.data(), inp16.data(),
                                 w16.data(), N, C, OC, false); }};
  const double gflop = 2.0 * N * C * OC / 1e9;
  print_row(l.name, "fwd", gflop, time_in_turn(fwd, samples), 1);
  const std::vector<Timing> tb = time_in_turn(bwd, samples);
  print_row(l.name, "bwd", 2 * gflop, {tb[0], tb[1], Timing{}, tb[2]}, 1);
  print_row(l.name, "dW only", gflop, time_in_turn(dweight, samples), 1);
}

}  // namespace

int main(int argc, char** argv) {
  const int samples = argc > 1 ? std::atoi(argv[1]) : 21;
  std::printf("threads %d, oneDNN isa %s, bf16 impl %s\n%s\n", omp_get_max_threads(),
              onednn_cpu_isa().c_str(), bf16_gemm_impl(kRows, 768, 2304).c_str(),
              fp16_gemm_path_description().c_str());
  std::printf("GFLOP/s (median / best of %d calls), M = %ld rows; ratio = fp32 time / bf16 time\n",
              samples, long(kRows));
  std::printf("%-17s | %15s | %15s | %15s | %15s | bf16 speed-up\n", "layer (K->N) pass", "fp32",
              "bf16", "bf16 out", "fp16");
  for (const Layer& l : kLayers) bench_layer(l, samples);
}

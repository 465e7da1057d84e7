// GFLOP/s of a linear layer's GEMMs in fp32 (kernels/cpu/matmul.h) against
// bf16 and fp16 (kernels/cpu/matmul_lowp.h) at GPT-2 124M's shapes: 256
// rows (micro-batch 4 x seq 64), the block's four linears and the tied LM
// head (768 -> 50257, a third of a step's GEMM FLOPs).
//
//   OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive build/bench/bench_matmul_lowp [samples=21] [layers]
//
// `layers`: a comma list of names to run (default all), e.g. "qkv,head".
// The variants are called in turn, one call each per round, so a noisy
// shared machine slows all of them alike. Each reports GFLOP/s of its
// median and best call by wall time, and of its median call by process CPU
// time (GFLOP per CPU-second: on a machine shared with other jobs this is
// the stable figure, since time spent descheduled is not counted; with
// OMP_WAIT_POLICY=passive a thread waiting at a barrier does not count
// either). "bf16 unsplit" is each GEMM as one oneDNN call (brgemm), as
// before matmul_lowp.cpp split the backward GEMMs: the before/after of that
// change in the same run.
// Forward: out = inp @ W^T + b (2*M*K*N flops). Backward: dinp and dweight
// (+dbias) (4*M*K*N flops); dW only: 2*M*K*N.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
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
// GPT-2 124M's four linears (C = 768, 4C = 3072, 3C = 2304) and the tied
// LM head (its weight is wte, (V, C); forward out = ln_f @ wte^T).
const Layer kLayers[] = {{"qkv", 768, 2304}, {"attnproj", 768, 768}, {"fc", 768, 3072},
                         {"fcproj", 3072, 768}, {"head", 768, 50257}};
constexpr int64_t kRows = 256;

double process_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Timing {
  double median = 0, best = 0, cpu_median = 0;  // seconds per call (wall, wall, CPU)
};
struct Variant {
  const char* name;
  std::function<void()> call;
};

// Each variant called in turn `samples` times after two warm-up rounds
// (primitive creation, page faults).
std::vector<Timing> time_in_turn(const std::vector<Variant>& vs, int samples) {
  std::vector<std::vector<double>> wall(vs.size()), cpu(vs.size());
  for (int s = -2; s < samples; s++)
    for (size_t i = 0; i < vs.size(); i++) {
      const double c0 = process_cpu_seconds();
      const auto t0 = std::chrono::steady_clock::now();
      vs[i].call();
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s >= 0) wall[i].push_back(dt), cpu[i].push_back(process_cpu_seconds() - c0);
    }
  std::vector<Timing> out;
  for (size_t i = 0; i < vs.size(); i++)
    out.push_back({median(wall[i]), *std::min_element(wall[i].begin(), wall[i].end()),
                   median(cpu[i])});
  return out;
}

// One line per variant; the first variant (fp32) is the ratio's base, and
// "bf16" is also compared with "bf16 unsplit" when both ran.
void print_pass(const char* layer, const char* pass, double gflop, const std::vector<Variant>& vs,
                int samples) {
  const std::vector<Timing> t = time_in_turn(vs, samples);
  const Timing* bf16 = nullptr;
  const Timing* unsplit = nullptr;
  for (size_t i = 0; i < vs.size(); i++) {
    std::printf("%-9s %-8s %-13s | wall %6.1f / %6.1f | cpu %6.1f GFLOP/s | vs fp32 x%.2f (cpu)\n",
                layer, pass, vs[i].name, gflop / t[i].median, gflop / t[i].best,
                gflop / t[i].cpu_median, t[0].cpu_median / t[i].cpu_median);
    if (std::strcmp(vs[i].name, "bf16") == 0) bf16 = &t[i];
    if (std::strcmp(vs[i].name, "bf16 unsplit") == 0) unsplit = &t[i];
  }
  if (bf16 && unsplit)
    std::printf("%-9s %-8s bf16 / bf16 unsplit: x%.2f (cpu), x%.2f (best wall)\n", layer, pass,
                unsplit->cpu_median / bf16->cpu_median, unsplit->best / bf16->best);
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
  const bool head = OC > 10000;  // the LM head: no bias, and fp16 (fp32 widening) skipped

  // The backward as one oneDNN call per GEMM (the layout before the split).
  const GemmSpec dinp_whole{.in = Precision::Bf16, .out = Precision::Fp32, .M = N, .N = C, .K = OC};
  const GemmSpec dw_whole{.in = Precision::Bf16, .out = Precision::Fp32, .M = OC, .N = C, .K = N,
                          .a_trans = true, .accumulate = true};
  const float* b = head ? nullptr : bias.data();
  float* dbp = head ? nullptr : db.data();

  std::vector<Variant> fwd = {
      {"fp32", [&] { matmul_forward(out.data(), inp.data(), w.data(), b, N, C, OC); }},
      {"bf16", [&] { matmul_forward_bf16(out.data(), inp16.data(), w16.data(), b, N, C, OC); }},
      {"bf16 out",
       [&] { matmul_forward_bf16_out(out16.data(), inp16.data(), w16.data(), b, N, C, OC); }}};
  std::vector<Variant> bwd = {
      {"fp32", [&] { matmul_backward(dinp.data(), dw.data(), dbp, dout.data(), inp.data(),
                                     w.data(), N, C, OC, false); }},
      {"bf16", [&] { matmul_backward_bf16(dinp.data(), dw.data(), dbp, dout16.data(),
                                          inp16.data(), w16.data(), N, C, OC, false); }}};
  // The unsplit oneDNN calls exist only where oneDNN has a bf16 matmul.
  const bool onednn_bf16 = lowp_gemm_path(Precision::Bf16) == LowpGemmPath::OneDnn;
  if (onednn_bf16)
    bwd.push_back({"bf16 unsplit", [&] {
                     gemm_lowp(dinp_whole, dout16.data(), w16.data(), nullptr, dinp.data());
                     gemm_lowp(dw_whole, dout16.data(), inp16.data(), nullptr, dw.data());
                   }});
  if (!head) {
    fwd.push_back({"fp16", [&] { matmul_forward_fp16(out.data(), inph.data(), wh.data(), b, N, C,
                                                     OC); }});
    bwd.push_back({"fp16", [&] { matmul_backward_fp16(dinp.data(), dw.data(), dbp, douth.data(),
                                                      inph.data(), wh.data(), N, C, OC, false); }});
  }
  // dweight alone (dinp null, no bias): the GEMM that reads dout transposed.
  std::vector<Variant> dweight = {
      {"fp32", [&] { matmul_backward(nullptr, dw.data(), nullptr, dout.data(), inp.data(),
                                     w.data(), N, C, OC, false); }},
      {"bf16", [&] { matmul_backward_bf16(nullptr, dw.data(), nullptr, dout16.data(),
                                          inp16.data(), w16.data(), N, C, OC, false); }}};
  if (onednn_bf16)
    dweight.push_back({"bf16 unsplit", [&] {
                         gemm_lowp(dw_whole, dout16.data(), inp16.data(), nullptr, dw.data());
                       }});
  const double gflop = 2.0 * N * C * OC / 1e9;
  const int n = head ? std::max(3, samples / 4) : samples;  // a head call is ~20x a block's
  print_pass(l.name, "fwd", gflop, fwd, n);
  print_pass(l.name, "bwd", 2 * gflop, bwd, n);
  print_pass(l.name, "dW only", gflop, dweight, n);
}

}  // namespace

int main(int argc, char** argv) {
  const int samples = argc > 1 ? std::atoi(argv[1]) : 21;
  const std::string only = argc > 2 ? std::string(",") + argv[2] + "," : "";
  std::printf("threads %d, oneDNN isa %s, bf16 impl %s\n%s\n%s\n", omp_get_max_threads(),
              onednn_cpu_isa().c_str(), bf16_gemm_impl(kRows, 768, 2304).c_str(),
              lowp_gemm_path_description(Precision::Bf16).c_str(),
              lowp_gemm_path_description(Precision::Fp16).c_str());
  std::printf("GFLOP/s: wall (median / best of %d calls), cpu (median call, GFLOP per "
              "CPU-second); M = %ld rows\n", samples, long(kRows));
  for (const Layer& l : kLayers)
    if (only.empty() || only.find(std::string(",") + l.name + ",") != std::string::npos)
      bench_layer(l, samples);
}

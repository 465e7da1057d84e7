// Compute measurements for `tessera calibrate`: GEMMs, memory bandwidth and
// attention, each through the engine's own library or kernel.
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "tessera/core/buffer.h"
#include "tessera/core/error.h"
#include "tessera/core/timer.h"
#include "tessera/kernels/cpu/attention.h"
#include "tessera/plan/calibrate.h"

namespace tessera::plan {

namespace {

// Planner shape (m, n, k) of a linear with `rows` tokens, `in` -> `out`
// features, and the sgemm the engine calls for it (kernels/cpu/matmul.cpp).
void add_linear(std::vector<CalibShape>& v, int64_t rows, int64_t in, int64_t out) {
  // forward: out (rows, out) = inp (rows, in) @ W^T      sgemm N,T  rows x out x in
  v.push_back({rows, out, in, 'N', 'T', rows, out, in});
  // input gradient: dinp (rows, in) = dout @ W           sgemm N,N  rows x in x out
  v.push_back({rows, in, out, 'N', 'N', rows, in, out});
  // weight gradient: dW (out, in) += dout^T @ inp         sgemm T,N  out x in x rows
  // The planner names it (in, out, rows) (layout_cost.cpp: {g.k, g.n, g.m}).
  v.push_back({in, out, rows, 'T', 'N', out, in, rows});
}

void fill(float* p, int64_t n, float scale) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = scale * float((i * 7919) % 101 - 50) / 50.0f;
}

}  // namespace

std::vector<CalibShape> training_gemm_shapes(const GPTConfig& m, int64_t micro_batch, int64_t tp) {
  const int64_t rows = micro_batch * m.seq_length, h = m.hidden_size, f = m.ffn();
  std::vector<CalibShape> v;
  add_linear(v, rows, h, 3 * h / tp);  // QKV (column parallel)
  add_linear(v, rows, h / tp, h);      // attention output (row parallel)
  add_linear(v, rows, h, f / tp);      // MLP up (column parallel)
  add_linear(v, rows, f / tp, h);      // MLP down (row parallel)
  add_linear(v, rows, h, m.padded_vocab(tp) / tp);  // tied LM head (vocab parallel)
  return v;
}

double measure_gemm(const CalibShape& s, double min_seconds) {
  // Leading dimensions of row-major operands as stored by the engine.
  const int64_t a_rows = s.ta == 'N' ? s.M : s.K, a_cols = s.ta == 'N' ? s.K : s.M;
  const int64_t b_rows = s.tb == 'N' ? s.K : s.N, b_cols = s.tb == 'N' ? s.N : s.K;
  Buffer a(a_rows * a_cols), b(b_rows * b_cols), c(s.M * s.N);
  fill(a.f32(), a_rows * a_cols, 0.1f);
  fill(b.f32(), b_rows * b_cols, 0.1f);
  fill(c.f32(), s.M * s.N, 0.0f);
  auto run = [&] {
    dnnl_status_t st = dnnl_sgemm(s.ta, s.tb, s.M, s.N, s.K, 1.0f, a.f32(), a_cols, b.f32(),
                                  b_cols, 0.0f, c.f32(), s.N);
    TESSERA_CHECK(st == dnnl_success, "calibrate: oneDNN sgemm failed for {}x{}x{}", s.M, s.N, s.K);
  };
  run();  // warm-up: page faults, oneDNN's kernel choice, thread start
  // Best of repeats: the planner predicts a quiet machine; noise only adds.
  // At least 10: on a shared box a descheduled OpenMP thread stalls a whole
  // small GEMM for a scheduler time slice (~10 ms, 10x its time).
  double best = 1e30, total = 0;
  for (int rep = 0; rep < 500 && (rep < 10 || total < min_seconds); ++rep) {
    Stopwatch sw;
    run();
    double e = sw.elapsed();
    best = std::min(best, e);
    total += e;
  }
  return 2.0 * double(s.M) * double(s.N) * double(s.K) / best;
}

double measure_triad_bandwidth(int64_t n) {
  Buffer a(n), b(n), c(n);
  fill(b.f32(), n, 1.0f);  // first touch by the same threads that run the triad
  fill(c.f32(), n, 1.0f);
  fill(a.f32(), n, 0.0f);
  float* pa = a.f32();
  const float* pb = b.f32();
  const float* pc = c.f32();
  const float q = 3.0f;
  double best = 1e30;
  for (int rep = 0; rep < 11; ++rep) {
    Stopwatch sw;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + q * pc[i];
    if (rep > 0) best = std::min(best, sw.elapsed());  // rep 0 warms up
  }
  TESSERA_CHECK(pa[n / 2] == pb[n / 2] + q * pc[n / 2], "calibrate: triad check failed");
  return 12.0 * double(n) / best;  // STREAM counts read b, read c, write a
}

AttentionTime measure_attention(int64_t B, int64_t T, int64_t C, int64_t NH) {
  Buffer qkv(B * T * 3 * C), out(B * T * C), lse(B * NH * T), dout(B * T * C), dqkv(B * T * 3 * C);
  fill(qkv.f32(), B * T * 3 * C, 1.0f);
  fill(dout.f32(), B * T * C, 0.01f);
  AttentionTime r;
  r.forward = r.backward = 1e30;
  for (int rep = 0; rep < 11; ++rep) {  // best of 10: a shared box stalls single runs
    Stopwatch f;
    cpu::attention_forward(out.f32(), lse.f32(), qkv.f32(), B, T, C, NH);
    double tf = f.elapsed();
    Stopwatch b;
    cpu::attention_backward(dqkv.f32(), dout.f32(), qkv.f32(), out.f32(), lse.f32(), B, T, C, NH);
    double tb = b.elapsed();
    if (rep == 0) continue;  // warm-up
    r.forward = std::min(r.forward, tf);
    r.backward = std::min(r.backward, tb);
  }
  r.batch = B, r.seq = T, r.hidden = C, r.heads = NH;
  r.planner_flops = 4.0 * double(B) * double(T) * double(T) * double(C);
  return r;
}

}  // namespace tessera::plan

// Compute measurements for `tessera calibrate`: GEMMs, memory bandwidth and
// attention, each through the engine's own library or kernel (attention
// through the backend being calibrated, kernels/backend.h, as training
// calls it).
#include <omp.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "tessera/core/buffer.h"
#include "tessera/core/error.h"
#include "tessera/core/timer.h"
#include "tessera/kernels/backend.h"
#include "tessera/kernels/gemm_peak.h"
#include "tessera/plan/calibrate.h"

namespace tessera::plan {

namespace {

void fill(float* p, int64_t n, float scale) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = scale * float((i * 7919) % 101 - 50) / 50.0f;
}

// The median seconds of `run` over at least `min_reps` timed repeats and at
// least `min_seconds` in all, after one untimed warm-up (page faults,
// oneDNN's kernel choice, thread start), each repeat starting with cold
// private caches. The median, not the best: the planner is checked against
// the median step of training runs on the same shared machine, where a
// descheduled thread or a neighbour's burst stalls single repeats, and the
// best repeat is a machine nobody trains on.
template <typename F>
double median_seconds(F&& run, int min_reps, double min_seconds) {
  run();
  std::vector<double> t;
  double total = 0;
  for (int rep = 0; rep < 500 && (rep < min_reps || total < min_seconds); ++rep) {
    kernels::evict_private_caches();
    Stopwatch sw;
    run();
    t.push_back(sw.elapsed());
    total += t.back();
  }
  return upper_median(std::move(t));
}

}  // namespace

double upper_median(std::vector<double> values) {
  TESSERA_CHECK(!values.empty(), "calibrate: a median of nothing");
  std::nth_element(values.begin(), values.begin() + long(values.size() / 2), values.end());
  return values[values.size() / 2];
}

Profile upper_median(const std::vector<Profile>& profiles) {
  Profile out;
  for (size_t k = 0; k < out.seconds.size(); ++k) {
    std::vector<double> t;
    for (const auto& p : profiles) t.push_back(p.seconds[k]);
    out.seconds[k] = upper_median(std::move(t));
  }
  return out;
}

double measure_gemm(const kernels::Backend& backend, Precision p, const CalibShape& s,
                    double min_seconds) {
  // The weight gradient accumulates into dW (beta 1, matmul.cpp); the
  // forward and input-gradient products overwrite their output.
  const kernels::GemmShape shape{
      .M = s.M, .N = s.N, .K = s.K, .ta = s.ta, .tb = s.tb, .beta = s.ta == 'T' ? 1.0f : 0.0f};
  // The median from cold private caches, as median_seconds above and for the same reasons.
  const kernels::GemmTiming in_a_step{
      .min_reps = 3, .min_seconds = min_seconds, .cold_caches = true};
  return shape.flops() / upper_median(kernels::gemm_linear_seconds(backend, p, shape, in_a_step));
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

namespace {

// One micro-batch's operands of the engine's attention, as both of its
// measurements below time it: all-ones q, k, v (the kernel's cost does not
// depend on the values) and a small upstream gradient.
struct AttentionOperands {
  const kernels::Backend& be;
  int64_t B, T;
  AttentionHeads heads;
  Buffer qkv, out, lse, dout, dqkv;  // (B, T, qkv width), (B, T, Cl), (B, NH, T), (B, T, Cl), (B, T, qkv width)
  AttentionOperands(const kernels::Backend& backend, int64_t b, int64_t t, const AttentionHeads& h)
      : be(backend), B(b), T(t), heads(h), qkv(B * T * h.qkv_width()), out(B * T * h.q_width()),
        lse(B * h.q_heads * T), dout(B * T * h.q_width()), dqkv(B * T * h.qkv_width()) {
    fill(qkv.f32(), B * T * h.qkv_width(), 1.0f);
    fill(dout.f32(), B * T * h.q_width(), 0.01f);
  }
  void forward(const DropoutSite* drop) {
    be.attention_forward(out.f32(), lse.f32(), qkv.f32(), B, T, heads, drop);
  }
  void backward(const DropoutSite* drop) {
    be.attention_backward(dqkv.f32(), dout.f32(), qkv.f32(), out.f32(), lse.f32(), B, T, heads,
                          drop);
  }
};

}  // namespace

AttentionTime measure_attention(const kernels::Backend& be, int64_t B, int64_t T,
                                const AttentionHeads& heads) {
  AttentionOperands a(be, B, T, heads);
  AttentionTime r;
  r.forward = median_seconds([&] { a.forward(nullptr); }, 3, 0.01);
  r.backward = median_seconds([&] { a.backward(nullptr); }, 3, 0.01);
  r.batch = B, r.seq = T, r.hidden = heads.q_width(), r.heads = heads.q_heads;
  r.planner_flops = 4.0 * double(B) * double(T) * double(T) * double(heads.q_width());
  return r;
}

double measure_attention_mask(const kernels::Backend& be, int64_t B, int64_t T,
                              const AttentionHeads& heads, double min_seconds) {
  // The attention-probability mask is drawn and applied inside the flash
  // kernel, tile by tile: its price is what it adds to the kernel, forward
  // and backward with the mask less the same without, per Philox draw
  // (the kernels' mask_draws): the draws, the products with the mask in
  // forward and backward, and whatever of them the kernel's other work hides,
  // timed where they run rather than as a loop of draws beside the kernel.
  // With and without alternate, and the median of the differences is taken,
  // so that a drift of the machine's speed does not land in the difference.
  // Megatron's default probability, 0.1.
  const DropoutSite site{
      .p = 0.1f, .seed = 1, .step = 1, .layer = 1, .site = DropoutSiteKind::AttentionProbs};
  AttentionOperands a(be, B, T, heads);
  auto pass = [&](const DropoutSite* drop) {
    a.forward(drop);
    a.backward(drop);
  };
  std::vector<double> extra;
  for (int round = 0; round < 5; ++round) {
    const double with = median_seconds([&] { pass(&site); }, 3, min_seconds / 5);
    const double without = median_seconds([&] { pass(nullptr); }, 3, min_seconds / 5);
    extra.push_back(with - without);
  }
  // The draws as the kernels' costs count them (backend.h).
  const double draws =
      double(kernels::Backend::attention_forward_cost(Precision::Fp32, B, T, heads, &site)
                 .begin()->mask_draws +
             kernels::Backend::attention_backward_cost(Precision::Fp32, B, T, heads, &site)
                 .begin()->mask_draws);
  return std::max(0.0, upper_median(extra)) / draws;
}

}  // namespace tessera::plan

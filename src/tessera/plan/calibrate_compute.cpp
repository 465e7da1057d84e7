// Compute measurements for `tessera calibrate`: GEMMs, memory bandwidth and
// attention, each through the engine's own library or kernel (the kernels
// through the CPU backend, kernels/backend.h, as training calls them).
#include <omp.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "tessera/core/buffer.h"
#include "tessera/core/error.h"
#include "tessera/core/timer.h"
#include "tessera/kernels/cpu_backend_info.h"
#include "tessera/kernels/gemm_peak.h"
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

namespace {

// Achieved FLOP/s of one shape timed by `seconds` (kernels/gemm_peak.h).
template <class Seconds>
double measure_gemm_with(const CalibShape& s, double min_seconds, Seconds seconds) {
  // The weight gradient accumulates into dW (beta 1, matmul.cpp); the
  // forward and input-gradient products overwrite their output.
  const kernels::GemmShape shape{
      .M = s.M, .N = s.N, .K = s.K, .ta = s.ta, .tb = s.tb, .beta = s.ta == 'T' ? 1.0f : 0.0f};
  // The median from cold private caches, as median_seconds above and for the same reasons.
  const kernels::GemmTiming in_a_step{
      .min_reps = 3, .min_seconds = min_seconds, .cold_caches = true};
  return shape.flops() / upper_median(seconds(shape, in_a_step));
}

}  // namespace

double measure_gemm(const CalibShape& s, double min_seconds) {
  return measure_gemm_with(s, min_seconds, kernels::gemm_fp32_seconds);
}

double measure_gemm_lowp(Precision p, const CalibShape& s, double min_seconds) {
  return measure_gemm_with(s, min_seconds,
                           [p](const kernels::GemmShape& g, const kernels::GemmTiming& t) {
                             return kernels::gemm_lowp_seconds(p, g, t);
                           });
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
  int64_t B, T, C, NH;
  Buffer qkv, out, lse, dout, dqkv;  // (B, T, 3C), (B, T, C), (B, NH, T), (B, T, C), (B, T, 3C)
  AttentionOperands(int64_t b, int64_t t, int64_t c, int64_t nh)
      : B(b), T(t), C(c), NH(nh), qkv(B * T * 3 * C), out(B * T * C), lse(B * NH * T),
        dout(B * T * C), dqkv(B * T * 3 * C) {
    TESSERA_CHECK(NH > 0 && C % NH == 0, "calibrate: width {} is not divisible by {} heads", C,
                  NH);
    fill(qkv.f32(), B * T * 3 * C, 1.0f);
    fill(dout.f32(), B * T * C, 0.01f);
  }
  void forward(const DropoutSite* drop) {
    kernels::cpu_backend().attention_forward(out.f32(), lse.f32(), qkv.f32(), B, T,
                                             AttentionHeads::mha(C, NH), drop);
  }
  void backward(const DropoutSite* drop) {
    kernels::cpu_backend().attention_backward(dqkv.f32(), dout.f32(), qkv.f32(), out.f32(),
                                              lse.f32(), B, T, AttentionHeads::mha(C, NH), drop);
  }
};

}  // namespace

AttentionTime measure_attention(int64_t B, int64_t T, int64_t C, int64_t NH) {
  AttentionOperands a(B, T, C, NH);
  AttentionTime r;
  r.forward = median_seconds([&] { a.forward(nullptr); }, 3, 0.01);
  r.backward = median_seconds([&] { a.backward(nullptr); }, 3, 0.01);
  r.batch = B, r.seq = T, r.hidden = C, r.heads = NH;
  r.planner_flops = 4.0 * double(B) * double(T) * double(T) * double(C);
  return r;
}

KernelTimes measure_kernels(int64_t rows, int64_t C, int64_t NH, int64_t F, int64_t V, int64_t T,
                            int64_t params, double min_seconds) {
  const kernels::Backend& be = kernels::cpu_backend();
  const int64_t B = rows / T;
  // (rows, 2 F) or (rows, C), whichever is larger: SwiGLU's input is [gate | up].
  const int64_t wide = rows * std::max(C, 2 * F);
  Buffer x(wide), y(wide), dy(wide), dx(wide);
  Buffer w(C), bias(F), dw(C), db(F), mean(rows), rstd(rows);
  Buffer logits(rows * V), lse(rows), losses(rows), wte(V * C), wpe(T * C), dwte(V * C),
      dwpe(T * C);
  fill(x.f32(), wide, 1.0f);
  fill(dy.f32(), wide, 0.01f);
  fill(w.f32(), C, 1.0f);
  fill(bias.f32(), F, 0.1f);
  fill(logits.f32(), rows * V, 1.0f);
  fill(wte.f32(), V * C, 0.02f);
  fill(wpe.f32(), T * C, 0.02f);
  std::vector<int32_t> tokens(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) tokens[size_t(i)] = int32_t((i * 7919) % V);
  be.layernorm_forward(y.f32(), mean.f32(), rstd.f32(), x.f32(), nullptr, w.f32(), bias.f32(),
                       rows, C);

  KernelTimes k{};
  auto per = [&](Kernel kind, double elements, auto&& run) {
    k[size_t(kind)] = median_seconds(run, 3, min_seconds) / elements;
  };
  const double rc = double(rows * C), rf = double(rows * F), rv = double(rows * V);
  per(Kernel::LayerNormForward, rc, [&] {
    be.layernorm_forward(y.f32(), mean.f32(), rstd.f32(), x.f32(), nullptr, w.f32(), bias.f32(),
                         rows, C);
  });
  per(Kernel::LayerNormBackward, rc, [&] {
    be.layernorm_backward(dx.f32(), dw.f32(), db.f32(), dy.f32(), x.f32(), w.f32(), mean.f32(),
                       rstd.f32(), rows, C);
  });
  per(Kernel::GeluForward, rf, [&] { be.gelu_forward(y.f32(), x.f32(), rows * F); });
  per(Kernel::GeluBackward, rf, [&] { be.gelu_backward(dx.f32(), x.f32(), dy.f32(), rows * F); });
  // The Llama family's RMSNorm (eps: Llama's 1e-5; backward reads the rstd
  // its forward wrote) and SwiGLU (x holds rows of [gate | up]).
  per(Kernel::RMSNormForward, rc, [&] {
    be.rmsnorm_forward(y.f32(), rstd.f32(), x.f32(), w.f32(), rows, C, 1e-5f);
  });
  per(Kernel::RMSNormBackward, rc, [&] {
    be.rmsnorm_backward(dx.f32(), dw.f32(), dy.f32(), x.f32(), w.f32(), rstd.f32(), rows, C);
  });
  per(Kernel::SwigluForward, rf, [&] { be.swiglu_forward(y.f32(), x.f32(), rows, F); });
  per(Kernel::SwigluBackward, rf, [&] { be.swiglu_backward(dx.f32(), x.f32(), dy.f32(), rows, F); });
  per(Kernel::Residual, rc, [&] { be.accumulate(y.f32(), x.f32(), rows * C); });
  per(Kernel::BiasAdd, rf, [&] { be.bias_add(y.f32(), bias.f32(), rows, F, nullptr); });
  // A linear's backward without its GEMMs (no dinp, no dweight): the
  // column sums of dY alone.
  per(Kernel::BiasGrad, rf, [&] {
    be.matmul_backward(nullptr, nullptr, db.f32(), dy.f32(), x.f32(), w.f32(), rows, 0, F, false,
                       true);
  });
  per(Kernel::EmbeddingForward, rc, [&] {
    be.token_embedding_forward(y.f32(), tokens.data(), wte.f32(), rows, C, 0, V);
    be.position_embedding_forward(y.f32(), wpe.f32(), B, T, C, 0);
  });
  per(Kernel::EmbeddingBackward, rc, [&] {
    be.token_embedding_backward(dwte.f32(), dy.f32(), tokens.data(), rows, C, 0, V);
    be.position_embedding_backward(dwpe.f32(), dy.f32(), B, T, C);
  });
  per(Kernel::CrossEntropyForward, rv, [&] {
    be.cross_entropy_forward(losses.f32(), lse.f32(), logits.f32(), tokens.data(), rows, V);
  });
  // In place, as the engine runs it (dlogits overwrite the logits); the
  // values drift between repeats, the memory traffic does not.
  per(Kernel::CrossEntropyBackward, rv, [&] {
    be.cross_entropy_backward(logits.f32(), logits.f32(), lse.f32(), tokens.data(), 1e-6f, rows,
                              V, 0);
  });
  // Dropout at Megatron's default 0.1, a hidden site in place over (rows, C).
  DropoutSite site{.p = 0.1f, .seed = 1, .step = 1, .layer = 1, .site = DropoutSiteKind::MlpOut};
  per(Kernel::Dropout, rc, [&] { be.dropout_rows(y.f32(), rows, C, 0, T, site); });
  // The attention-probability mask is drawn and applied inside the flash
  // kernel, tile by tile: its price is what it adds to the kernel, forward
  // and backward with the mask less the same without, per Philox draw
  // (attention_dropout_draws): the draws, the products with the mask in
  // forward and backward, and whatever of them the kernel's other work hides,
  // timed where they run rather than as a loop of draws beside the kernel.
  // With and without alternate, and the median of the differences is taken,
  // so that a drift of the machine's speed does not land in the difference.
  site.site = DropoutSiteKind::AttentionProbs;
  {
    AttentionOperands a(B, T, C, NH);
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
    const double draws = double(B * NH) * double(kernels::attention_dropout_draws(T, true) +
                                                 kernels::attention_dropout_draws(T, false));
    k[size_t(Kernel::AttentionDropout)] = std::max(0.0, upper_median(extra)) / draws;
  }
  // The optimizer and the norm over the model's parameters.
  const int64_t n = params;
  Buffer p(n), g(n), m(n), v(n);
  fill(p.f32(), n, 0.02f);
  fill(g.f32(), n, 0.001f);
  fill(m.f32(), n, 0.0f);
  fill(v.f32(), n, 0.0f);
  kernels::AdamWArgs args;
  args.lr = 1e-4f;
  per(Kernel::AdamW, double(n),
      [&] { be.adamw_update(p.f32(), g.f32(), m.f32(), v.f32(), n, args, {}); });
  volatile double sink = 0;
  per(Kernel::GradNorm, double(n), [&] { sink = sink + be.sum_squares(g.f32(), n); });
  return k;
}

}  // namespace tessera::plan

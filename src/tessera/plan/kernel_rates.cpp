#include "tessera/plan/kernel_rates.h"

#include <algorithm>

#include "tessera/core/buffer.h"
#include "tessera/kernels/backend.h"
#include "tessera/kernels/trace_backend.h"
#include "tessera/plan/training_step.h"

namespace tessera::plan {

bool is_kernel_rate_key(std::string_view key) {
  return key == kAttentionMaskDraw || kernels::Backend::reports_call(key);
}

double kernel_rate(const KernelRates& rates, std::string_view key) {
  const auto it = rates.find(key);
  return it == rates.end() ? 0.0 : it->second;
}

namespace {

// The seconds and elements of every timed call, by name.
struct Totals {
  struct Sum {
    double seconds = 0, elements = 0;
  };
  std::map<std::string, Sum, std::less<>> by_name;
  bool timing = false;  // false while warming up

  // A call made only of memory-bound parts: its time shared among them by
  // the bytes each moves (a norm with its residual add). A call with a GEMM
  // or the attention in it says nothing of its memory-bound parts' own time.
  void add(const kernels::KernelCalls& calls, double seconds) {
    if (!timing) return;
    double bytes = 0;
    for (const kernels::KernelCall& c : calls) {
      if (c.cls != kernels::CallClass::Memory) return;
      bytes += c.bytes_read + c.bytes_written;
    }
    for (const kernels::KernelCall& c : calls) {
      if (c.elements <= 0) continue;
      const double share = bytes > 0 ? (c.bytes_read + c.bytes_written) / bytes
                                     : 1.0 / double(calls.size());
      Sum& s = by_name[c.kernel];
      s.seconds += seconds * share;
      s.elements += double(c.elements);
    }
  }
};

}  // namespace

KernelRates measure_kernel_rates(const kernels::Backend& backend, const GPTConfig& model,
                                 int64_t micro_batch, int64_t params) {
  Totals totals;
  const kernels::TraceBackend timed(
      [](const kernels::KernelCall&) {}, &backend,
      [&totals](const kernels::KernelCalls& calls, double s) { totals.add(calls, s); });

  GPTConfig one_layer = model;
  one_layer.num_layers = 1;
  one_layer.hidden_dropout = one_layer.attention_dropout = 0.1f;
  {
    TrainingStep step(one_layer, micro_batch, Precision::Fp32, &timed);
    step.run(nullptr);  // warms up
    totals.timing = true;
    step.run(nullptr);
  }

  // A linear's bias, on the MLP's fc linear: rows (N, F), its bias (F). The
  // fp32 GEMM adds it in a pass of its own (matmul_forward.bias), the same
  // sweep as bias_add; its gradient is matmul_backward with the GEMMs off.
  const int64_t N = micro_batch * model.seq_length, F = model.fc_width();
  {
    Buffer y(N * F), dy(N * F), bias(F), dbias(F);  // (N, F), (N, F), (F), (F)
    std::fill_n(dy.f32(), N * F, 0.01f);
    std::fill_n(bias.f32(), F, 0.1f);
    for (int rep = 0; rep < 3; ++rep) {
      totals.timing = rep > 0;
      timed.bias_add(y.f32(), bias.f32(), N, F, nullptr);
      timed.matmul_backward(nullptr, nullptr, dbias.f32(), dy.f32(), y.f32(), bias.f32(), N, 0,
                            F, false, true);
    }
  }
  // The optimizer and the gradient norm over the model's parameters.
  {
    Buffer p(params), g(params), m(params), v(params);  // (params) each, fp32
    std::fill_n(p.f32(), params, 0.02f);
    std::fill_n(g.f32(), params, 0.001f);
    kernels::AdamWArgs args;
    args.lr = 1e-4f;
    for (int rep = 0; rep < 3; ++rep) {
      totals.timing = rep > 0;
      timed.adamw_update(p.f32(), g.f32(), m.f32(), v.f32(), params, args, {});
      (void)timed.sum_squares(g.f32(), params);
    }
  }

  KernelRates rates;
  for (const auto& [name, s] : totals.by_name)
    if (s.elements > 0 && s.seconds > 0) rates[name] = s.seconds / s.elements;
  if (const double b = kernel_rate(rates, "bias_add"); b > 0) rates["matmul_forward.bias"] = b;
  return rates;
}

}  // namespace tessera::plan

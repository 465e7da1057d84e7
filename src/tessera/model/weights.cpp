#include "tessera/model/weights.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "tessera/core/error.h"
#include "tessera/core/rng.h"

namespace tessera {

void bind_unit(ModelWeights& w, const ParamLayout& layout, const ParamUnit& unit,
               float* unit_base) {
  auto at = [&](const std::string& name) -> float* {
    const ParamEntry& e = layout.find(name);
    TESSERA_CHECK(e.offset >= unit.begin && e.offset < unit.end, "{} is not in the unit", name);
    return unit_base + (e.offset - unit.begin);
  };
  if (unit.layer < 0) {  // embeddings or final norm: bind whichever it holds
    auto maybe = [&](const char* name, float*& view) {
      if (!layout.contains(name)) return;
      const ParamEntry& e = layout.find(name);
      if (e.offset >= unit.begin && e.offset < unit.end) view = at(name);
    };
    maybe("wte", w.wte);
    maybe("wpe", w.wpe);
    maybe("ln_f.weight", w.lnf_w);
    maybe("ln_f.bias", w.lnf_b);
    maybe("lm_head.weight", w.lm_head);
    return;
  }
  const auto& layers = layout.layers();
  const size_t i = size_t(std::find(layers.begin(), layers.end(), unit.layer) - layers.begin());
  TESSERA_CHECK(i < layers.size(), "layer {} is not on this rank", unit.layer);
  if (w.layers.size() < layers.size()) w.layers.resize(layers.size());
  // Biases the family leaves out (RMSNorm, --disable-bias-linear) stay null.
  auto p = [&](const char* s) -> float* {
    const std::string name = "h." + std::to_string(unit.layer) + "." + s;
    return layout.contains(name) ? at(name) : nullptr;
  };
  LayerWeights& lw = w.layers[i];
  if (unit.expert) {  // an MoE layer's routed experts: their unit alone
    lw.experts_fc_w = p("mlp.experts.fc.weight");
    lw.experts_fc_b = p("mlp.experts.fc.bias");
    lw.experts_proj_w = p("mlp.experts.proj.weight");
    lw.experts_proj_b = p("mlp.experts.proj.bias");
    return;
  }
  // The layer's dense unit: everything but the routed experts (bound with
  // their own unit, which may come before or after this one).
  LayerWeights d = {p("ln_1.weight"), p("ln_1.bias"), p("attn.qkv.weight"),
                    p("attn.qkv.bias"), p("attn.proj.weight"), p("attn.proj.bias"),
                    p("ln_2.weight"), p("ln_2.bias"), p("mlp.fc.weight"),
                    p("mlp.fc.bias"), p("mlp.proj.weight"), p("mlp.proj.bias"),
                    p("mlp.router.weight"), nullptr, nullptr, nullptr, nullptr,
                    p("mlp.shared_expert.fc.weight"), p("mlp.shared_expert.fc.bias"),
                    p("mlp.shared_expert.proj.weight"), p("mlp.shared_expert.proj.bias"),
                    p("mlp.shared_expert_gate.weight")};
  d.experts_fc_w = lw.experts_fc_w;
  d.experts_fc_b = lw.experts_fc_b;
  d.experts_proj_w = lw.experts_proj_w;
  d.experts_proj_b = lw.experts_proj_b;
  lw = d;
}

ModelWeights bind_weights(const ParamLayout& layout, float* base) {
  ModelWeights w;
  for (const ParamUnit& u : layout.units()) bind_unit(w, layout, u, base + u.begin);
  return w;
}

static uint64_t name_hash(std::string_view s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a: stable across builds and platforms
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

static bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

void init_unit_weights(const ParamLayout& layout, const GPTConfig& m, const ParamUnit& unit,
                       float* unit_base, uint64_t seed) {
  const float residual_std = m.init_std / std::sqrt(2.0f * float(m.num_layers));
  for (const ParamEntry& e : layout.entries()) {
    if (e.offset < unit.begin || e.offset >= unit.end) continue;
    float* p = unit_base + (e.offset - unit.begin);
    const int64_t n = e.numel();
    const bool is_ln_gain = ends_with(e.name, "ln_1.weight") || ends_with(e.name, "ln_2.weight") ||
                            e.name == "ln_f.weight";
    if (is_ln_gain) {
      for (int64_t i = 0; i < n; ++i) p[i] = 1.0f;
      continue;
    }
    if (!e.weight_decay) {  // biases and LayerNorm shifts
      for (int64_t i = 0; i < n; ++i) p[i] = 0.0f;
      continue;
    }
    const bool residual_out = ends_with(e.name, "attn.proj.weight") ||
                              ends_with(e.name, "mlp.proj.weight") ||
                              ends_with(e.name, "mlp.experts.proj.weight") ||
                              ends_with(e.name, "mlp.shared_expert.proj.weight");
    const float std = residual_out ? residual_std : m.init_std;
    const uint64_t stream = name_hash(e.name);
    const bool vocab_rows = e.name == "wte" || e.name == "lm_head.weight";
    const int64_t real_rows = vocab_rows ? m.vocab_size : e.global_shape[0];
    // Elements per dim-0 row (the experts' stacks are 3-D).
    const int64_t cols = e.global_shape.numel() / e.global_shape[0];
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      int64_t g = layout.global_index(e, i);
      p[i] = g / cols < real_rows ? std * rng_normal(seed, stream, uint64_t(g)) : 0.0f;
    }
  }
}

void init_weights(const ParamLayout& layout, const GPTConfig& m, float* base, uint64_t seed) {
  for (const ParamUnit& u : layout.units()) init_unit_weights(layout, m, u, base + u.begin, seed);
}

}  // namespace tessera

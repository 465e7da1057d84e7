#include "tessera/optim/adamw.h"

#include <algorithm>

#include "tessera/kernels/cpu/adamw.h"

namespace tessera {

AdamW::AdamW(const ParamLayout& layout, int64_t begin, int64_t end, const AdamWConfig& cfg)
    : begin_(begin), end_(end), cfg_(cfg), m_(end - begin), v_(end - begin) {
  for (const ParamEntry& e : layout.entries()) {
    int64_t lo = std::max(begin, e.offset), hi = std::min(end, e.offset + e.numel());
    if (lo >= hi) continue;
    if (!runs_.empty() && runs_.back().decay == e.weight_decay && runs_.back().end == lo)
      runs_.back().end = hi;
    else
      runs_.push_back({lo, hi, e.weight_decay});
  }
}

void AdamW::step(float* params, float* grads, float lr, float grad_scale, int64_t step) {
  for (const Run& r : runs_) {
    cpu::AdamWArgs a;
    a.lr = lr;
    a.beta1 = cfg_.beta1;
    a.beta2 = cfg_.beta2;
    a.eps = cfg_.eps;
    a.weight_decay = r.decay ? cfg_.weight_decay : 0.0f;
    a.grad_scale = grad_scale;
    a.step = step;
    int64_t o = r.begin - begin_;
    cpu::adamw_update(params + o, grads + o, m_.f32() + o, v_.f32() + o, r.end - r.begin, a);
  }
}

}  // namespace tessera

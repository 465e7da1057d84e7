#include "tessera/optim/adamw.h"

#include <algorithm>


namespace tessera {

AdamW::AdamW(const ParamLayout& layout, std::vector<FlatSegment> segments, int64_t shard_numel,
             const AdamWConfig& cfg)
    : cfg_(cfg), segments_(std::move(segments)), m_(shard_numel), v_(shard_numel) {
  // Runs: parameter elements only (unit padding is never updated and stays 0).
  for (const FlatSegment& s : segments_) {
    TESSERA_CHECK(s.shard_offset + s.size() <= shard_numel, "AdamW: segment past the shard");
    for (const ParamEntry& e : layout.entries()) {
      int64_t lo = std::max(s.global_begin, e.offset);
      int64_t hi = std::min(s.global_end, e.offset + e.numel());
      if (lo >= hi) continue;
      const int64_t off = s.shard_offset + (lo - s.global_begin);
      if (!runs_.empty()) {  // extend the previous run when it continues seamlessly
        Run& last = runs_.back();
        if (last.decay == e.weight_decay && last.global_begin + last.size == lo &&
            last.shard_offset + last.size == off) {
          last.size += hi - lo;
          continue;
        }
      }
      runs_.push_back({lo, hi - lo, off, e.weight_decay});
    }
  }
}

AdamW::AdamW(const ParamLayout& layout, const AdamWConfig& cfg)
    : AdamW(layout, {FlatSegment{0, layout.numel(), 0}}, layout.numel(), cfg) {}

void AdamW::step(const kernels::Ops& ops, float* params, Indexing params_at, float* grads,
                 Indexing grads_at, float lr, float grad_scale, int64_t step,
                 kernels::Act working) {
  for (const Run& r : runs_) {
    kernels::AdamWArgs a;
    a.lr = lr;
    a.beta1 = cfg_.beta1;
    a.beta2 = cfg_.beta2;
    a.eps = cfg_.eps;
    a.weight_decay = r.decay ? cfg_.weight_decay : 0.0f;
    a.grad_scale = grad_scale;
    a.step = step;
    const int64_t at = params_at == Indexing::Global ? r.global_begin : r.shard_offset;
    float* g = grads + (grads_at == Indexing::Global ? r.global_begin : r.shard_offset);
    // (r.size) of the working copy, indexed like params
    const kernels::Act w = working ? kernels::Act(working.u16() + at, working.dtype) : kernels::Act();
    ops.adamw_update(params + at, g, m_.f32() + r.shard_offset, v_.f32() + r.shard_offset, r.size,
                     a, w);
  }
}

}  // namespace tessera

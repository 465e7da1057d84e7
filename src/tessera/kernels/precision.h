// The low-precision state kernels::Ops reads when a run's precision
// (core/dtype.h) is not fp32: the model's working copy of the parameters
// (bf16 or fp16 bit patterns, refreshed by the model from the fp32 master
// parameters) and the scratch the activation operands are cast into on
// their way into a GEMM; and the dtype-tagged buffer views (Act, ConstAct)
// every kernel takes.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "tessera/core/dtype.h"

namespace tessera::kernels {

// A buffer as the kernels see it: its address and its element type, the
// tag every Backend method dispatches on (kernels/backend.h). fp32, or the
// 16-bit bit patterns of bf16 / fp16 (core/dtype.h): model activations
// stored in the run's low precision (model/activations.h), a GEMM operand
// or weight cast for --bf16 / --fp16, a working copy of the parameters. A
// plain float* converts to an fp32 view, so fp32 callers read as before.
struct Act {
  void* p = nullptr;
  Precision dtype = Precision::Fp32;
  Act() = default;
  Act(float* f) : p(f) {}  // NOLINT: implicit, an fp32 buffer is an fp32 view
  // 16-bit words holding bf16 or fp16 values (dtype Bf16 or Fp16).
  Act(uint16_t* u, Precision t) : p(u), dtype(t) {}
  bool lowp() const { return dtype != Precision::Fp32; }
  float* f32() const { return lowp() ? nullptr : static_cast<float*>(p); }
  uint16_t* u16() const { return lowp() ? static_cast<uint16_t*>(p) : nullptr; }
  explicit operator bool() const { return p != nullptr; }
};
// The read-only form.
struct ConstAct {
  const void* p = nullptr;
  Precision dtype = Precision::Fp32;
  ConstAct() = default;
  ConstAct(const float* f) : p(f) {}     // NOLINT: implicit, as Act
  ConstAct(const uint16_t* u, Precision t) : p(u), dtype(t) {}
  ConstAct(Act a) : p(a.p), dtype(a.dtype) {}  // NOLINT
  bool lowp() const { return dtype != Precision::Fp32; }
  const float* f32() const { return lowp() ? nullptr : static_cast<const float*>(p); }
  const uint16_t* u16() const { return lowp() ? static_cast<const uint16_t*>(p) : nullptr; }
  explicit operator bool() const { return p != nullptr; }
};

class LowPrecision {
 public:
  Precision precision = Precision::Fp32;
  bool active() const { return precision != Precision::Fp32; }

  // fp32 weights [begin, end) are read from lowp[0, end - begin).
  struct Range {
    const float* begin;
    const float* end;
    const uint16_t* lowp;
  };
  // The working copy as the GEMMs find it: one range per bound buffer (the
  // whole flat parameter buffer, or one per gathered ZeRO-3 unit).
  std::vector<Range> ranges;

  // The working copy of fp32 weight w, or null when w is not in it.
  const uint16_t* find(const float* w) const {
    const std::less<const float*> lt;
    for (const Range& r : ranges)
      if (!lt(w, r.begin) && lt(w, r.end)) return r.lowp + (w - r.begin);
    return nullptr;
  }
  // Binds [begin, begin + n) to lowp, dropping ranges it overlaps (a freed
  // gathered buffer whose address came back).
  void bind(const float* begin, int64_t n, const uint16_t* lowp) {
    const std::less<const float*> lt;
    const float* end = begin + n;
    std::erase_if(ranges, [&](const Range& r) { return lt(r.begin, end) && lt(begin, r.end); });
    ranges.push_back({begin, end, lowp});
  }

  // Scratch slot i (0: the activation operand, 1: the output gradient, 2: a
  // weight outside the working copy), at least n elements; reused call
  // after call, micro-batch after micro-batch.
  uint16_t* scratch(int i, int64_t n) const {
    if (placed_) return placed_ + int64_t(i) * kPlacedSlot;
    auto& v = scratch_[i];
    if (int64_t(v.size()) < n) v.resize(size_t(n));
    return v.data();
  }
  // The op trace's scratch (model/op_trace.h): slot i at base + i * 2^40
  // elements, never allocated, for a backend that never touches it.
  void place_scratch(uint16_t* base) { placed_ = base; }

 private:
  static constexpr int64_t kPlacedSlot = int64_t(1) << 40;
  mutable std::vector<uint16_t> scratch_[3];
  uint16_t* placed_ = nullptr;
};

}  // namespace tessera::kernels

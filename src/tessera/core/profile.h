// Profile: where a step's time goes, by kind of work. Optional: code holding
// a null Profile* pays one branch. Used by the benchmark's breakdown and the
// step-time report.
#pragma once
#include <array>
#include <string_view>

#include "tessera/core/timer.h"

namespace tessera {

enum class Op { Gemm, Attention, LayerNorm, Gelu, Residual, Embedding, Loss, Optimizer, GradNorm,
                Data, Comm, Dropout, Cast, kCount };

constexpr std::string_view op_name(Op op) {
  constexpr std::array<std::string_view, size_t(Op::kCount)> names = {
      "gemm", "attention", "layernorm", "gelu", "residual", "embedding", "loss", "optimizer",
      "grad-norm", "data", "comm", "dropout", "cast"};
  return names[size_t(op)];
}

struct Profile {
  std::array<double, size_t(Op::kCount)> seconds{};
  // The kind the innermost open ProfileScope charges (kCount: none): what a
  // tracing backend (model/op_trace.h) files each call it records under, so
  // the planner prices the same kinds the engine measures.
  Op open = Op::kCount;
  void reset() { seconds.fill(0.0); }
  // this += scale * other, kind by kind (the planner sums predicted profiles).
  Profile& add(const Profile& other, double scale = 1.0) {
    for (size_t i = 0; i < seconds.size(); ++i) seconds[i] += scale * other.seconds[i];
    return *this;
  }
  double& operator[](Op op) { return seconds[size_t(op)]; }
  double operator[](Op op) const { return seconds[size_t(op)]; }
  double total() const {
    double t = 0;
    for (double s : seconds) t += s;
    return t;
  }
};

// Adds the lifetime of the scope to profile->seconds[op] when profile is set.
// The model's kernels (kernels/ops.h) and tensor-parallel helpers time
// themselves with it; loops around them (optimizer, data, collectives) use
// it directly.
class ProfileScope {
 public:
  ProfileScope(Profile* p, Op op) : p_(p), op_(op), outer_(p ? p->open : Op::kCount),
                                    t0_(p ? now_seconds() : 0) {
    if (p_) p_->open = op;
  }
  ~ProfileScope() {
    if (!p_) return;
    p_->seconds[size_t(op_)] += now_seconds() - t0_;
    p_->open = outer_;
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  Profile* p_;
  Op op_;
  Op outer_;  // the kind open before this scope, restored after it
  double t0_;
};

}  // namespace tessera

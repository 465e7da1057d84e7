// One kernel call as a tracing backend writes it down (model/op_trace.h):
// which kernel, on which shapes and precision, and what it costs — the
// numbers the planner prices (plan/layer_ops.cpp) and calibration measures.
// The cost of each kernel is stated once, beside its declaration in
// backend.h; a backend that records (kernels/trace_backend.h) hands these to
// a sink in call order.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>

#include "tessera/core/error.h"
#include "tessera/kernels/precision.h"

namespace tessera::kernels {

// What kind of work a call is, for the planner: a GEMM (priced at the
// GEMM rate of its shape), the fused attention (its matmul FLOPs at the
// attention efficiency), or memory-bound (its bytes, or a calibrated time
// per element).
enum class CallClass { Gemm, Attention, Memory };

struct KernelCall {
  const char* kernel = "";  // the Backend method; "matmul_backward.dinp" for one part of one
  CallClass cls = CallClass::Memory;
  Precision dtype = Precision::Fp32;  // the GEMM's operands, or a 16-bit view the kernel reads or writes
  int64_t m = 0, n = 0, k = 0, batch = 1;  // GEMM: C (m x n) = A (m x k) B (k x n); attention: B, T, Cl, NH
  int64_t elements = 0;     // memory-bound: elements it is applied to; attention: B T Cl
  double bytes_read = 0, bytes_written = 0;  // device memory traffic
  double flops = 0;         // GEMM 2 m n k batch; attention its matmuls' (and RoPE's)
  int64_t mask_draws = 0;   // attention: counter-based draws of its probability-dropout mask
  const void* key = nullptr;  // the parameter (weight, else bias or norm gain) it reads, if any
};

// The calls one Backend method amounts to: one, or the parts of a fused
// kernel (matmul_backward's two GEMMs and bias sum, a norm with its
// residual add), in the order they run.
class KernelCalls {
 public:
  KernelCalls() = default;
  KernelCalls(std::initializer_list<KernelCall> calls) {  // NOLINT: {a, b} reads as the list
    for (const KernelCall& c : calls) add(c);
  }
  // A fourth part is a cost declaration's bug (backend.cpp): refused, not
  // written over the third.
  void add(const KernelCall& c) {
    TESSERA_CHECK(size_ < kMax, "kernel {}: more than {} calls in one Backend method", c.kernel,
                  kMax);
    parts_[size_++] = c;
  }
  const KernelCall* begin() const { return parts_; }
  const KernelCall* end() const { return parts_ + size_; }
  int size() const { return size_; }

 private:
  static constexpr int kMax = 3;
  KernelCall parts_[kMax];
  int size_ = 0;
};

using KernelSink = std::function<void(const KernelCall&)>;

}  // namespace tessera::kernels

// The pieces a kernel's cost is written in (backend_methods.inc,
// backend.cpp): one GEMM, one memory-bound pass, from a kernel name, its
// shape and the bytes it moves. Device memory is counted as the kernels
// stream it: every buffer read or written once.
#pragma once
#include <cstdint>

#include "tessera/kernels/kernel_call.h"
#include "tessera/kernels/precision.h"

namespace tessera::kernels::call_cost {

inline constexpr double kF32 = 4.0;  // bytes of an fp32 element

inline double bytes_of(Precision p) { return double(dtype_size(p)); }

// C (m x n) = A (m x k) B (k x n): 2 m n k FLOPs; bytes left to the caller.
inline KernelCall gemm(const char* kernel, Precision dtype, int64_t m, int64_t n, int64_t k) {
  KernelCall c;
  c.kernel = kernel;
  c.cls = CallClass::Gemm;
  c.dtype = dtype;
  c.m = m, c.n = n, c.k = k;
  c.flops = 2.0 * double(m) * double(n) * double(k);
  return c;
}

// A memory-bound pass applied to `elements`, reading and writing those
// bytes; dtype: the 16-bit view it reads or writes, if any.
inline KernelCall memory(const char* kernel, int64_t elements, double read, double written,
                         Precision dtype = Precision::Fp32) {
  KernelCall c;
  c.kernel = kernel;
  c.dtype = dtype;
  c.elements = elements;
  c.bytes_read = read;
  c.bytes_written = written;
  return c;
}

// a (n) += b (n), a fp32, b of b_dtype: the residual add.
inline KernelCall residual_add(const char* kernel, int64_t n,
                               Precision b_dtype = Precision::Fp32) {
  return memory(kernel, n, double(n) * (kF32 + bytes_of(b_dtype)), double(n) * kF32, b_dtype);
}

}  // namespace tessera::kernels::call_cost

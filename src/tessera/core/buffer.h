// Buffer: one aligned, zero-initialised allocation that owns memory for many
// tensors (parameters, gradients, optimizer moments, activations).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "tessera/core/dtype.h"
#include "tessera/core/error.h"

namespace tessera {

class Buffer {
 public:
  Buffer() = default;
  Buffer(int64_t numel, Precision dtype = Precision::Fp32) { allocate(numel, dtype); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(numel_, o.numel_);
    std::swap(dtype_, o.dtype_);
    return *this;
  }
  ~Buffer() { std::free(data_); }

  void allocate(int64_t numel, Precision dtype = Precision::Fp32) {
    std::free(data_);
    numel_ = numel;
    dtype_ = dtype;
    // 64-byte alignment: one AVX-512 vector / one cache line.
    size_t bytes = (size_t(numel) * dtype_size(dtype) + 63) / 64 * 64;
    data_ = bytes ? std::aligned_alloc(64, bytes) : nullptr;
    TESSERA_CHECK(bytes == 0 || data_, "out of memory allocating {} bytes", bytes);
    if (bytes) std::memset(data_, 0, bytes);
  }
  void zero() {
    if (data_) std::memset(data_, 0, nbytes());
  }

  float* f32() const { return static_cast<float*>(data_); }
  void* data() const { return data_; }
  int64_t numel() const { return numel_; }
  Precision dtype() const { return dtype_; }
  size_t nbytes() const { return size_t(numel_) * dtype_size(dtype_); }

 private:
  void* data_ = nullptr;
  int64_t numel_ = 0;
  Precision dtype_ = Precision::Fp32;
};

}  // namespace tessera

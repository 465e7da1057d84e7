// Element types. fp32 is what the kernels compute in today; the type is a
// property of every tensor and buffer so bf16/fp16 storage can follow
// without changing signatures.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tessera {

// F64 exists for scalars that must not round (the squared gradient norm).
enum class DType : uint8_t { F32, BF16, F16, F64 };

// A bf16 or fp16 value is stored as its 16-bit pattern; the names say which
// format a uint16 buffer holds (kernels/cpu/cast.h converts).
using bf16_t = uint16_t;
using fp16_t = uint16_t;

constexpr size_t dtype_size(DType t) {
  return t == DType::F64 ? 8 : t == DType::F32 ? 4 : 2;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::F64: return "f64";
  }
  return "?";
}

}  // namespace tessera

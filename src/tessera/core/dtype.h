// Element types: of a buffer, a kernel's view, a collective's payload, and
// a run's GEMM precision (--bf16 / --fp16), which is one of the first three.
// One enum, so nothing converts between "the run's precision" and "this
// buffer's type".
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tessera {

// As a run's precision: fp32, every kernel in fp32 (the reference). bf16 /
// fp16: the GEMMs take 16-bit inputs with fp32 accumulation, and the
// activations that feed or leave a GEMM are stored in 16 bits
// (model/activations.h says which); statistics, softmax, the loss, the
// residual stream, every gradient, reduction and the optimizer state stay
// fp32. Fp64 is no run's precision: it exists for scalars that must not
// round (the squared gradient norm's all-reduce).
enum class Precision : uint8_t { Fp32, Bf16, Fp16, Fp64 };

// A bf16 or fp16 value is stored as its 16-bit pattern; the names say which
// format a uint16 buffer holds (kernels/cpu/cast.h converts).
using bf16_t = uint16_t;
using fp16_t = uint16_t;

constexpr size_t dtype_size(Precision t) {
  return t == Precision::Fp64 ? 8 : t == Precision::Fp32 ? 4 : 2;
}

// Two spellings, both already printed: the element type's short name
// (f32, bf16, f16, f64: the communicator's errors, the GEMM descriptions)
// and the run's precision as the flags, TOML, JSON and reports write it
// (fp32, bf16, fp16).
constexpr std::string_view dtype_name(Precision t) {
  switch (t) {
    case Precision::Fp32: return "f32";
    case Precision::Bf16: return "bf16";
    case Precision::Fp16: return "f16";
    case Precision::Fp64: return "f64";
  }
  return "?";
}
constexpr const char* precision_name(Precision p) {
  switch (p) {
    case Precision::Fp32: return "fp32";
    case Precision::Bf16: return "bf16";
    case Precision::Fp16: return "fp16";
    case Precision::Fp64: return "fp64";
  }
  return "?";
}
// The inverse, over a run's three precisions; false (p untouched) for any
// other name.
constexpr bool precision_parse(std::string_view name, Precision& p) {
  for (Precision q : {Precision::Fp32, Precision::Bf16, Precision::Fp16})
    if (name == precision_name(q)) return p = q, true;
  return false;
}

}  // namespace tessera

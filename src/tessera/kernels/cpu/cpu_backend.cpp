#include "tessera/kernels/cpu/cpu_backend.h"

namespace tessera::kernels {

const Backend& cpu_backend() {
  static const CpuBackend backend;
  return backend;
}

}  // namespace tessera::kernels

#include "tessera/kernels/trace_backend.h"

#include "tessera/kernels/call_cost.h"  // the pieces of the costs an entry states itself

namespace tessera::kernels {

TraceBackend::Timed TraceBackend::record(const KernelCalls& calls, const void* key) const {
  for (KernelCall k : calls) {
    k.key = key;
    sink_(k);
  }
  return Timed(*this, calls);
}

// Each method hands its cost to the sink (tagged with the parameter it
// reads), then runs on the inner backend while `timed` lives; with no inner
// backend it returns a value-initialised Ret (sum_squares: 0).
#define TESSERA_BACKEND_METHOD(Ret, name, params, args, key, ...) \
  Ret TraceBackend::name params const {                            \
    const Timed timed = record(__VA_ARGS__, key);                  \
    if (inner_) return inner_->name args;                          \
    return Ret();                                                  \
  }
#include "tessera/kernels/backend_methods.inc"
#undef TESSERA_BACKEND_METHOD

}  // namespace tessera::kernels

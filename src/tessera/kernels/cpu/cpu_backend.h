// The CPU backend: kernels::Backend over the raw kernels of kernels/cpu/.
// Each method reads its views' dtype tags and calls the one cpu:: function
// for that combination (the same functions the model called before the
// seam, so results are bit-identical); a combination without a kernel is a
// tessera::Error. Not final: a backend that runs only some ops elsewhere (or
// a test that watches the calls) derives from it and overrides those.
//
// Outside kernels/ the instance is reached through kernels/cpu_backend_info.h.
#pragma once
#include "tessera/kernels/backend.h"
#include "tessera/kernels/cpu_backend_info.h"

namespace tessera::kernels {

class CpuBackend : public Backend {
 public:
  const char* name() const override { return "cpu"; }

  // Each kernel of backend_methods.inc, defined in cpu_backend.cpp (or,
  // for a kernel added since, in its own file of kernels/cpu/).
#define TESSERA_BACKEND_METHOD(Ret, name, params, args, key, ...) Ret name params const override;
#include "tessera/kernels/backend_methods.inc"
#undef TESSERA_BACKEND_METHOD
};

}  // namespace tessera::kernels

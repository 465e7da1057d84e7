// The scalars of one AdamW update (decoupled weight decay, bias-corrected
// moments): plain data that Backend::adamw_update takes and every backend
// reads the same way.
#pragma once
#include <cstdint>

namespace tessera::kernels {

struct AdamWArgs {
  float lr = 0, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float weight_decay = 0;  // applied as param -= lr * weight_decay * param
  float grad_scale = 1;    // grad is multiplied by this before use
  int64_t step = 1;        // 1-based, for bias correction
};

}  // namespace tessera::kernels

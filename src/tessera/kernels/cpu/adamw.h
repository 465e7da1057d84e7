// AdamW update over a contiguous range of a flat buffer (decoupled weight
// decay, bias-corrected moments). The gradient is read, scaled (clipping and
// loss scaling folded into grad_scale) and then zeroed in the same pass, so
// the next step accumulates from zero without another sweep over memory.
#pragma once
#include <cstdint>

namespace tessera::cpu {

struct AdamWArgs {
  float lr = 0, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float weight_decay = 0;  // applied as param -= lr * weight_decay * param
  float grad_scale = 1;    // grad is multiplied by this before use
  int64_t step = 1;        // 1-based, for bias correction
};

// params, grads, m, v: (n) each.
void adamw_update(float* params, float* grads, float* m, float* v, int64_t n, const AdamWArgs& a);

}  // namespace tessera::cpu

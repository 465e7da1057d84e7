// AdamW update over a contiguous range of a flat buffer (decoupled weight
// decay, bias-corrected moments). The gradient is read, scaled (clipping and
// loss scaling folded into grad_scale) and then zeroed in the same pass, so
// the next step accumulates from zero without another sweep over memory.
//
// Mixed precision (--bf16 / --fp16): given a working copy, the same pass
// also writes each updated parameter's 16-bit value into it, straight from
// the register that holds the new fp32 value, instead of a separate cast pass
// over the whole buffer afterwards. The fp32 update is the same either way.
#pragma once
#include <cstdint>

#include "tessera/core/dtype.h"
#include "tessera/kernels/adamw_args.h"

namespace tessera::cpu {

using kernels::AdamWArgs;  // the scalars (kernels/adamw_args.h)

// params, grads, m, v: (n) each. working (n): null, or the 16-bit copy of
// params to write (working_type BF16 or F16: the bits cast.h's
// fp32_to_bf16 / fp32_to_fp16 give).
void adamw_update(float* params, float* grads, float* m, float* v, int64_t n, const AdamWArgs& a,
                  uint16_t* working = nullptr, Precision working_type = Precision::Bf16);

}  // namespace tessera::cpu

// Learning rate: linear warm-up from 0 to the peak over warmup_iters steps,
// then cosine decay to min_lr at decay_iters, constant after (Megatron-LM's
// "cosine" style).
#pragma once
#include <cstdint>

namespace tessera {

struct LrSchedule {
  float max_lr = 6e-4f, min_lr = 6e-5f;
  int64_t warmup_iters = 0, decay_iters = 1;

  // step is 1-based: the first optimizer step is step 1.
  float at(int64_t step) const;
};

}  // namespace tessera

#include "tessera/optim/lr_schedule.h"

#include <cmath>

namespace tessera {

float LrSchedule::at(int64_t step) const {
  if (warmup_iters > 0 && step <= warmup_iters)
    return max_lr * float(step) / float(warmup_iters);
  if (step >= decay_iters || decay_iters <= warmup_iters) return min_lr;
  const double ratio = double(step - warmup_iters) / double(decay_iters - warmup_iters);
  const double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));
  return float(min_lr + coeff * (max_lr - min_lr));
}

}  // namespace tessera

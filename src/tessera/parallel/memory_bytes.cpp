#include "tessera/parallel/memory_bytes.h"

namespace tessera {

MemoryBytes zero_state_bytes(double params, StateBytesPerParam per, int zero_stage, int64_t dp) {
  const double replicas = double(dp);
  const double weights = params * per.params, grads = params * per.grads,
               optimizer = params * per.optimizer;
  MemoryBytes b;
  b.params = zero_stage >= 3 ? weights / replicas : weights;
  b.grads = zero_stage >= 2 ? grads / replicas : grads;
  b.optimizer = zero_stage >= 1 ? optimizer / replicas : optimizer;
  return b;
}

double split_backward_grad_bytes(double params, StateBytesPerParam per, int zero_stage,
                                 bool split_backward) {
  return split_backward && zero_stage >= 2 ? params * per.grads : 0.0;
}

}  // namespace tessera

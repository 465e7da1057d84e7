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

MemoryBytes zero_state_bytes(double params, double expert_params, StateBytesPerParam per,
                             int zero_stage, int64_t dp, int64_t expert_dp) {
  const MemoryBytes d = zero_state_bytes(params, per, zero_stage, dp);
  const MemoryBytes e = zero_state_bytes(expert_params, per, zero_stage, expert_dp);
  MemoryBytes b;
  b.params = d.params + e.params;
  b.grads = d.grads + e.grads;
  b.optimizer = d.optimizer + e.optimizer;
  return b;
}

double split_backward_grad_bytes(double params, StateBytesPerParam per, int zero_stage,
                                 bool split_backward) {
  return split_backward && zero_stage >= 2 ? params * per.grads : 0.0;
}

}  // namespace tessera

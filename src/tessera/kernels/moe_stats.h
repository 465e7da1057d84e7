// What moe_route_forward (backend_methods.inc) reports about one MoE
// layer's routing of a micro-batch: stats (kMoeStats + E) fp32. The model
// reads nothing of it; the trainer sums it into the step's metrics
// (train/moe_metrics.h) and the tests compare it with PyTorch's.
#pragma once
#include <cstdint>

namespace tessera::kernels {

enum MoeStat : int64_t {
  kMoeAuxLoss = 0,  // the aux loss before its coefficient (backend_methods.inc: moe_route_forward)
  kMoeZLoss = 1,    // mean over tokens of logsumexp(logits)^2, before its coefficient
  kMoeDropped = 2,  // token choices dropped by the capacity
  kMoeTokens = 3,   // tokens routed (N)
  kMoeStats = 4,    // then (E): the choices of each expert, before any drop
};

}  // namespace tessera::kernels

#include "tessera/config/engine_cp.h"

namespace tessera {

const char* cp_unsupported_in_engine(const ParallelConfig& p, const GPTConfig& model) {
  if (p.cp == 1) return nullptr;
  // The expert-parallel exchange is not run beside the cp ring.
  if (p.ep > 1) return "--expert-model-parallel-size (expert parallelism)";
  // The MoE aux loss is taken per whole sequence (seq_aux_loss).
  if (model.moe()) return "--num-experts (MoE layers)";
  return nullptr;
}

}  // namespace tessera

#include "tessera/config/engine_cp.h"

namespace tessera {

const char* cp_unsupported_in_engine(const ParallelConfig& p, const GPTConfig& model) {
  if (p.cp == 1) return nullptr;
  // Sequence parallelism splits a cp rank's rows again over tp: the dropout
  // keys and positions of such a row are not derived yet.
  if (p.tp > 1 && p.sequence_parallel) return "--sequence-parallel";
  // The cp mpirun tests cover 1F1B and GPipe pipelines only.
  if (p.pp > 1 && p.schedule != ScheduleKind::OneFOneB && p.schedule != ScheduleKind::GPipe)
    return "--pipeline-schedule interleaved, zb-h1 or zbv (1f1b and gpipe run)";
  // The MoE aux loss is taken per whole sequence (seq_aux_loss).
  if (model.moe()) return "--num-experts (MoE layers)";
  return nullptr;
}

}  // namespace tessera

#include "tessera/plan/layout.h"

#include <fmt/format.h>

namespace tessera::plan {

int64_t activation_element_bytes(Precision p) { return p == Precision::Fp32 ? 4 : 2; }

std::string PlanLayout::str() const {
  // Uneven stages: the first / last stage's layers (--decoder-first/last-
  // pipeline-num-layers), as "first 1" / "last 2".
  std::string split;
  if (par.first_stage_layers) split += fmt::format(" first {}", *par.first_stage_layers);
  if (par.last_stage_layers) split += fmt::format(" last {}", *par.last_stage_layers);
  // Context parallelism after tp (all_gather named; p2p is the default).
  const std::string cp =
      par.cp > 1 ? fmt::format(" cp {}{}", par.cp,
                               par.cp_comm == CpCommType::AllGather ? " ag" : "")
                 : std::string();
  // Expert parallelism with its dispatcher (alltoall named "a2a", allgather "ag").
  const std::string ep =
      par.ep > 1 ? fmt::format(" ep {}{}", par.ep,
                               par.moe_dispatcher == MoeDispatcher::AllGather ? " ag" : " a2a")
                 : std::string();
  return fmt::format("tp {}{} pp {} dp {}{} mb {} v {} zero {} rc {}{} {}{}{}{}", par.tp, cp, par.pp,
                     par.dp, ep, par.micro_batch, par.virtual_stages, par.zero_stage,
                     recompute_name(par.recompute), par.sequence_parallel ? " sp" : "",
                     schedule_kind_name(par.schedule), split, overlap_grad_reduce ? " ogr" : "",
                     overlap_param_gather ? " opg" : "") + (fp8 ? " fp8" : "") +
         (tp_comm_overlap ? " tpo" : "");
}

}  // namespace tessera::plan

#include "tessera/plan/layout.h"

#include <fmt/format.h>

namespace tessera::plan {

const char* precision_name(Precision p) { return p == Precision::FP32 ? "fp32" : "mixed16"; }

int64_t activation_element_bytes(Precision p) { return p == Precision::FP32 ? 4 : 2; }

std::string PlanLayout::str() const {
  return fmt::format("tp {} pp {} dp {} mb {} v {} zero {} rc {}{} {}{}{}", par.tp, par.pp, par.dp,
                     par.micro_batch, par.virtual_stages, par.zero_stage,
                     recompute_name(par.recompute), par.sequence_parallel ? " sp" : "",
                     schedule_kind_name(par.schedule), overlap_grad_reduce ? " ogr" : "",
                     overlap_param_gather ? " opg" : "");
}

}  // namespace tessera::plan

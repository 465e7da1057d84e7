// ParallelConfig's fields, declared once (field.h): the layout flags of
// `tessera train`, their help and ranges, and their keys in checkpoint
// metadata and tune's trial log. Every other file names a layout flag
// through flag:: below, so each is spelled here and nowhere else.
#pragma once
#include <span>

#include "tessera/config/field.h"
#include "tessera/config/parallel_config.h"

namespace tessera {

namespace flag {
inline constexpr const char tp[] = "--tensor-model-parallel-size";
inline constexpr const char pp[] = "--pipeline-model-parallel-size";
inline constexpr const char cp[] = "--context-parallel-size";
inline constexpr const char cp_comm[] = "--cp-comm-type";
inline constexpr const char ep[] = "--expert-model-parallel-size";
inline constexpr const char moe_dispatcher[] = "--moe-token-dispatcher-type";
inline constexpr const char micro_batch[] = "--micro-batch-size";
inline constexpr const char global_batch[] = "--global-batch-size";
inline constexpr const char zero_stage[] = "--zero-stage";
inline constexpr const char recompute[] = "--recompute-granularity";
inline constexpr const char sequence_parallel[] = "--sequence-parallel";
inline constexpr const char schedule[] = "--pipeline-schedule";
inline constexpr const char virtual_stages[] = "--virtual-pipeline-stages";
inline constexpr const char first_stage_layers[] = "--decoder-first-pipeline-num-layers";
inline constexpr const char last_stage_layers[] = "--decoder-last-pipeline-num-layers";
// A launch flag of `tessera train`, not a field: it sets --virtual-pipeline-
// stages from the layers per chunk, so a planned layout replaces it too.
inline constexpr const char layers_per_virtual_stage[] = "--num-layers-per-virtual-pipeline-stage";
}  // namespace flag

// In the order a planned layout writes them (tp first, the uneven stages
// last), then dp, which no flag sets (world / (tp x pp)).
std::span<const Field<ParallelConfig>> parallel_fields();

// The field of `flag` (one of flag::); throws for a flag of no field.
const Field<ParallelConfig>& parallel_field(std::string_view flag);

// Throws "FLAG must be ... (got V)" when v is outside the range of `flag`'s
// field (tp, pp >= 1, zero-stage 0-3, ...).
void check_parallel_range(const char* flag, int64_t v);

}  // namespace tessera

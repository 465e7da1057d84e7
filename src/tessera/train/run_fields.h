// TrainConfig's own fields declared as a table (config/field.h), beside the
// model's (GPTConfig) and the layout's (config/parallel_fields.h): the
// precision switches and the data-parallel overlap switches, which a planned
// layout writes (overlap) and tune's trial log records.
#pragma once
#include <span>

#include "tessera/config/field.h"
#include "tessera/train/train_config.h"

namespace tessera {

namespace flag {
inline constexpr const char bf16[] = "--bf16";
inline constexpr const char fp16[] = "--fp16";
inline constexpr const char grad_reduce_bf16[] = "--grad-reduce-in-bf16";
inline constexpr const char overlap_grad_reduce[] = "--overlap-grad-reduce";
inline constexpr const char overlap_param_gather[] = "--overlap-param-gather";
}  // namespace flag

std::span<const Field<TrainConfig>> run_fields();

}  // namespace tessera

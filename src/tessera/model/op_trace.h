// The op list by tracing (model/op_list.h says what the list holds): the
// engine's own code — GPT's embedding, one transformer layer's
// block_forward / block_recompute / block_backward, the final norm, LM head
// and loss — run for one micro-batch on a compute-free kernel backend and a
// tensor-parallel group that moves nothing (kernels/trace_backend.h,
// comm/trace_backend.h). Every kernel and collective it issues is written
// down in order with the cost its backend declares, so the list cannot
// drift from the engine: there is no second description of a layer to keep
// in step.
//
// The run is tp rank 0's (the rank with the most real vocabulary columns)
// of a copy of the model with one layer, at the planned micro-batch,
// sequence length, tp, sequence parallelism, recomputation, precision and
// dropout. Its buffers are addresses nothing is mapped at: the traced
// kernels never read or write them, so tracing a 1T-parameter layout costs
// microseconds and no memory.
#pragma once
#include "tessera/model/op_list.h"

namespace tessera {

// The trace of `c` (flash attention: the engine's kernel; op_list() swaps
// in the planner's unfused variant). Throws tessera::Error for a shape the
// engine rejects.
OpList trace_op_list(const OpListConfig& c);

}  // namespace tessera

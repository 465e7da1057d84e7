#include "tessera/train/run_fields.h"

#include <array>

namespace tessera {

namespace {

using T = TrainConfig;

const std::array<Field<T>, 5> kFields{{
    {flag::bf16, nullptr, 0, &T::bf16,
     "GEMMs in bf16 with fp32 accumulation (fp32 master weights, optimizer, activations and "
     "everything else)"},
    {flag::fp16, nullptr, 0, &T::fp16,
     "GEMMs on fp16 inputs with fp32 accumulation, dynamic loss scaling"},
    {flag::grad_reduce_bf16, nullptr, 0, &T::grad_reduce_bf16,
     "--bf16: reduce data-parallel gradients in bf16 (half the bytes; default fp32)"},
    {flag::overlap_grad_reduce, "overlap_grad_reduce", kSurfaceLayout | kSurfaceTrial,
     &T::overlap_grad_reduce,
     "start each data-parallel gradient reduction as soon as backward has finished its layer, "
     "behind the rest of backward (default: after the whole backward)"},
    {flag::overlap_param_gather, "overlap_param_gather", kSurfaceLayout | kSurfaceTrial,
     &T::overlap_param_gather,
     "ZeRO-1/2: the next step's forward waits for each layer's gathered parameters instead of "
     "the optimizer step waiting for all (needs --overlap-grad-reduce)"},
}};

}  // namespace

std::span<const Field<TrainConfig>> run_fields() { return kFields; }

}  // namespace tessera

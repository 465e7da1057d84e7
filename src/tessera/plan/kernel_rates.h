// The memory-bound kernels' speed, as calibration measures it and a system
// file's [kernels] table holds it: seconds per element of each call the
// engine's backend makes, by the name its cost gives it (kernels/backend.h:
// "layernorm_forward", "accumulate", "matmul_backward.dbias", ...), so the
// planner prices each op-list entry by its own kernel's measurement
// (layer_ops.cpp). One more key, kAttentionMaskDraw, holds the flash
// attention's dropout mask per Philox draw.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "tessera/config/gpt_config.h"

namespace tessera::kernels {
class Backend;
}

namespace tessera::plan {

using KernelRates = std::map<std::string, double, std::less<>>;

// Seconds per Philox draw of the attention kernels' probability mask.
inline constexpr std::string_view kAttentionMaskDraw = "attention_dropout";

// Whether `key` may appear in a [kernels] table: a name some Backend call
// reports, or kAttentionMaskDraw.
bool is_kernel_rate_key(std::string_view key);

// The rate of `key` in `rates`; 0: not measured.
double kernel_rate(const KernelRates& rates, std::string_view key);

// Every memory-bound call of one training micro-batch of `model` (one layer
// of it: a layer's calls repeat per layer, and the embedding, head and loss
// are there once), run through `backend` and timed call by call where the
// step runs it, at the model's own shapes (its heads and key/value heads,
// its MLP's width, SwiGLU's [gate | up]), with dropout 0.1 at both sites so
// that the hidden dropout is among them. A fused call's time is shared
// among its parts by the bytes each moves. Beside the step: a linear's bias
// pass and bias gradient on their own (inside the step they run within a
// GEMM's call), and AdamW and the gradient norm over `params` parameters.
// Each rate is the time of all its calls over all their elements, after one
// untimed step that warms up.
KernelRates measure_kernel_rates(const kernels::Backend& backend, const GPTConfig& model,
                                 int64_t micro_batch, int64_t params);

}  // namespace tessera::plan

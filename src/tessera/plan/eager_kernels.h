// The Llama family's element-wise code as eager PyTorch runs it (torchtitan
// without torch.compile): one kernel per tensor op, each reading and writing
// its operands in full, where the op list prices one fused pass per kernel.
// Counted from torchtitan 9dec370 (2024-12): models/norms.py RMSNorm,
// models/llama/model.py apply_rotary_emb and FeedForward.forward, and the
// backward PyTorch's autograd runs for each op (derivatives.yaml).
#pragma once
#include <string_view>

#include "tessera/config/gpt_config.h"
#include "tessera/plan/layout.h"

namespace tessera::plan {

// Bytes eager PyTorch moves per element of an op-list memory kernel it runs
// unfused (rmsnorm_forward / _backward, swiglu_forward / _backward), or 0 for
// a kernel it runs as one pass anyway.
double eager_bytes_per_element(std::string_view kernel);

// Bytes of eager rotary embedding in one pass (forward, or its backward) of
// one layer for one micro-batch on a tp rank: q and k upcast to fp32, turned
// by a complex multiply and cast back. The engine applies RoPE inside its
// attention kernel, so the op list has no entry for it.
double eager_rope_bytes(const GPTConfig& m, const PlanLayout& L);

}  // namespace tessera::plan

#include "tessera/train/memory_check.h"

#include <algorithm>

#include "tessera/config/parallel_fields.h"
#include "tessera/core/error.h"
#include "tessera/model/activations.h"
#include "tessera/model/param_layout.h"

namespace tessera {

namespace {

// One micro-batch's activation shape on this rank, as GPT::act_shape builds
// it (there is no GPT yet: building one allocates the parameters), through
// the same act_shape_of, so the Llama family's widths count too.
ActShape shape_of(const TrainConfig& c, const ParamLayout& layout) {
  GPTConfig m = c.model;
  m.seq_length /= c.par.cp;  // context parallelism: T / cp rows of each sequence here
  const int64_t V =
      std::max<int64_t>(0, std::min(layout.vocab_end(), m.vocab_size) - layout.vocab_begin());
  // fp32 as before: the lower bound counts every activation at 4 bytes.
  ActShape s = act_shape_of(m, c.par.micro_batch, layout.tp(), c.par.sequence_parallel,
                            int64_t(layout.layers().size()), layout.has_head(), V,
                            c.par.recompute, Precision::Fp32);
  set_layer_kinds(s, c.model, layout.layers());  // its MoE layers, as GPT::act_shape
  if (c.model.moe()) s.ep = c.par.ep;  // the expert-side views (GPT::act_shape)
  return s;
}

}  // namespace

MemoryBytes rank_memory_lower_bound(const TrainConfig& c, int64_t tp_rank, int64_t pp_rank) {
  const ParamLayout layout = ParamLayout::build(c.model, c.par, tp_rank, pp_rank);
  const double params = double(layout.numel());
  // ZeRO shards dense units over dp x cp, expert units (this rank's E / ep
  // experts, every ep rank the same size) over the expert-dp ranks.
  const double experts = double(layout.expert_numel());
  MemoryBytes b = zero_state_bytes(params - experts, experts, kFp32AdamBytes, c.par.zero_stage,
                                   c.par.dp * c.par.cp, c.par.expert_dp());
  if (c.precision() != Precision::Fp32) b.params += 2 * params;  // the 16-bit working copy
  b.grads += split_backward_grad_bytes(params, kFp32AdamBytes, c.par.zero_stage,
                                      c.par.split_backward());
  b.activations = double(activations_bytes(shape_of(c, layout)));
  return b;
}

void check_memory_fits(const MemoryBytes& need, double available_bytes, int64_t ranks_on_node) {
  if (available_bytes <= 0) return;
  const double per_rank = available_bytes / double(std::max<int64_t>(1, ranks_on_node));
  TESSERA_CHECK(need.total() <= per_rank,
                "the model needs at least {:.1f} GB per rank (parameters {:.1f}, gradients {:.1f}, "
                "optimizer {:.1f}, activations {:.1f} GB) but {:.1f} GB are available{}: a smaller "
                "model, more ranks ({}, {}, {}) or a smaller {}",
                need.total() / 1e9, need.params / 1e9, need.grads / 1e9, need.optimizer / 1e9,
                need.activations / 1e9, per_rank / 1e9,
                ranks_on_node > 1 ? fmt::format(" to each of the {} ranks on this node", ranks_on_node)
                                  : "",
                flag::tp, flag::pp, flag::zero_stage, flag::micro_batch);
}

}  // namespace tessera

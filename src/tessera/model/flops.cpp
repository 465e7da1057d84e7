#include "tessera/model/flops.h"

namespace tessera {

double layer_forward_flops(const GPTConfig& m, int64_t seq) {
  const double s = double(seq), h = double(m.hidden_size), f = double(m.ffn());
  // qkv (GPT: 3 h columns; fewer under GQA), proj, fc (2 f under SwiGLU),
  // fc-proj. Integers well below 2^53: exact in any order.
  const double qkv = double(m.qkv_width()), fc = double(m.fc_width());
  const double linears = 2 * s * (h * qkv + h * h + h * fc + h * f);
  const double attention = 2 * 2 * s * s * h;                      // q k^T and p v
  return linears + attention;
}

double head_forward_flops(const GPTConfig& m, int64_t seq) {
  return 2.0 * double(seq) * double(m.hidden_size) * double(m.vocab_size);
}

// What an MoE layer (docs/moe.md) does beyond the dense layer's one MLP per
// token: K experts' MLPs (the active parameters; drops not subtracted), the
// router's (N, C) x (C, E) GEMM and the shared expert's MLP and gate.
static double moe_extra_flops(const GPTConfig& m, int64_t seq) {
  const double s = double(seq), h = double(m.hidden_size), f = double(m.ffn());
  const double mlp = 2 * s * (h * double(m.fc_width()) + h * f);
  double shared = 0;  // the shared expert: a dense MLP of width S on every token, its gate
  if (m.moe_shared())
    shared = 2 * s * h * double(m.moe_shared_fc_width() + m.moe_shared_expert_intermediate_size) +
             (m.moe_shared_expert_gate ? 2 * s * h : 0.0);
  return double(m.moe_router_topk - 1) * mlp + 2 * s * h * double(m.num_experts) + shared;
}

FlopCount step_flops(const GPTConfig& m, int64_t sequences, Recompute recompute,
                     ScheduleKind schedule) {
  double layers = double(m.num_layers) * layer_forward_flops(m, m.seq_length);
  for (int64_t l = 0; l < m.num_layers; ++l)
    if (m.moe_layer(l)) layers += moe_extra_flops(m, m.seq_length);
  const double head = head_forward_flops(m, m.seq_length);
  FlopCount f;
  f.model = 3 * (layers + head) * double(sequences);
  double extra = 0;
  if (recompute == Recompute::Full) extra = layers;  // every layer's forward again
  if (recompute == Recompute::Selective)             // the attention core again
    extra = double(m.num_layers) * 4.0 * double(m.seq_length) * double(m.seq_length) *
            double(m.hidden_size);
  // The split backward's weight pass recomputes each layer once more.
  if (splits_backward(schedule)) extra *= 2;
  f.hardware = f.model + extra * double(sequences);
  return f;
}

}  // namespace tessera

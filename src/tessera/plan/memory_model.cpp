#include "tessera/plan/memory_model.h"

#include <algorithm>

#include "tessera/model/activations.h"

namespace tessera::plan {

StateBytesPerParam state_bytes_per_param(Precision p) {
  if (p == Precision::FP32) return kFp32AdamBytes;
  return {2, 2, 12};
}

StateBytesPerParam engine_state_bytes_per_param(Precision p) {
  return p == Precision::FP32 ? kFp32AdamBytes : kMixed16AdamBytes;
}

double korthikanti_layer_bytes(const GPTConfig& m, int64_t micro_batch, int64_t tp,
                               bool sp, Recompute rc, bool flash) {
  const double s = double(m.seq_length), b = double(micro_batch), h = double(m.hidden_size);
  const double a = double(m.num_heads), t = double(tp);
  const double sbh = s * b * h;
  if (rc == Recompute::Full) return sp ? 2 * sbh / t : 2 * sbh;
  // The 5as/h term: attention scores, softmax output and its dropout mask.
  const double scores = (rc == Recompute::Selective || flash) ? 0.0 : 5 * a * s / h;
  // Korthikanti's 34 assumes a 4h MLP: 10 (LayerNorm inputs, dropout masks,
  // residual) are per token and replicated over tp unless SP; 24 are split.
  const double ffn_scale = double(m.ffn()) / (4 * h);
  const double split = 8 + 16 * ffn_scale;  // = 24 for a 4h MLP: qkv in, QK^T, V, proj in, MLP
  if (sp) return sbh / t * (10 + split + scores);
  return sbh * (10 + split / t + scores / t);
}

ActShape engine_shape(const GPTConfig& m, int64_t micro_batch, int64_t tp, int64_t layers,
                      bool has_head, bool sequence_parallel, Recompute recompute,
                      Precision precision) {
  // GPT::act_shape's own builder. Only real vocabulary rows get logits; tp
  // rank 0 (the largest slice) holds min(padded / tp, vocab) of them. bf16
  // and fp16 store alike (2 bytes); the engine's shape names one.
  return act_shape_of(m, micro_batch, tp, sequence_parallel, layers, has_head,
                      std::min(m.padded_vocab(tp) / tp, m.vocab_size), recompute,
                      precision == Precision::FP32 ? tessera::Precision::Fp32
                                                   : tessera::Precision::Bf16);
}

int64_t in_flight_chunks(ScheduleKind kind, int64_t p, int64_t v, int64_t m, int64_t stage) {
  switch (kind) {
    case ScheduleKind::GPipe: return m * v;
    case ScheduleKind::OneFOneB: return std::min(m, p - stage);
    case ScheduleKind::Interleaved:
      return std::min(m * v, 2 * (p - stage - 1) + (v - 1) * p + 1);
  }
  return m * v;
}

}  // namespace tessera::plan

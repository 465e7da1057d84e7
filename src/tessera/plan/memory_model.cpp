#include "tessera/plan/memory_model.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "tessera/model/activations.h"
#include "tessera/plan/moe_cost.h"
#include "tessera/parallel/schedule.h"

namespace tessera::plan {

namespace {

// ZBV's greedy order has no closed form: each rank's peak_in_flight of its
// list, the engine's slot count, computed once per (p, m) (a search prices
// many layouts of the same pipeline; the greedy run is O(p m)).
int64_t zbv_in_flight(int64_t p, int64_t m, int64_t stage) {
  static std::mutex mu;
  static std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> peaks;  // (p, m) -> (p,)
  const std::lock_guard<std::mutex> lock(mu);
  auto it = peaks.find({p, m});
  if (it == peaks.end()) {
    std::vector<int64_t> per_rank;
    for (const auto& list : build_pipeline(ScheduleKind::ZeroBubbleV, p, 2, m).ranks)
      per_rank.push_back(peak_in_flight(list));
    it = peaks.emplace(std::pair{p, m}, std::move(per_rank)).first;
  }
  return it->second[size_t(stage)];
}

}  // namespace

StateBytesPerParam state_bytes_per_param(Precision p) {
  if (p == Precision::Fp32) return kFp32AdamBytes;
  // bf16: Megatron-LM keeps the gradients in fp32 (4; layout.h).
  return {2, p == Precision::Bf16 ? 4.0 : 2.0, 12};
}

StateBytesPerParam engine_state_bytes_per_param(Precision p) {
  return p == Precision::Fp32 ? kFp32AdamBytes : kMixed16AdamBytes;
}

bool stores_dropout_masks(const GPTConfig& m, bool gpt_without_dropout) {
  return m.hidden_dropout > 0 || (!m.llama_family() && !gpt_without_dropout);
}

double korthikanti_layer_bytes(const GPTConfig& m, int64_t micro_batch, int64_t tp,
                               bool sp, Recompute rc, bool flash, bool fp8, bool gpt_without_dropout) {
  const double s = double(m.seq_length), b = double(micro_batch), h = double(m.hidden_size);
  const double a = double(m.num_heads), t = double(tp);
  const double sbh = s * b * h;
  if (rc == Recompute::Full) return sp ? 2 * sbh / t : 2 * sbh;
  // The 5as/h term: attention scores, softmax output and its dropout mask.
  const double scores = (rc == Recompute::Selective || flash) ? 0.0 : 5 * a * s / h;
  // Korthikanti's 34 per sbh, in 16-bit words of h per token: 10 per token
  // and replicated over tp unless SP (both norms' inputs 4, their outputs,
  // the qkv and fc GEMMs' inputs, 4, the two hidden dropout masks 2); 24
  // split over tp (q, k, v 6, the projection's input 2, the MLP's 16: its
  // activation's input and output, 2 F each).
  //
  // The Llama family's widths: q k v are qkv_width (GQA stores fewer k, v
  // heads); SwiGLU keeps the fc output (gate and up, 2 F) and its product
  // (F), 3 F against GELU's 2 F. Written as Korthikanti's terms times the
  // family's ratios, which are exactly 1 for GPT.
  const double qkv = 6 * double(m.qkv_width()) / (3 * h);
  // Mixture of experts: each token's K routed rows through an expert of
  // this width, and the routing's own tensors (moe_cost.h).
  const double mlp = moe_mlp_activation_units(
      m, 16 * (double(m.ffn()) / (4 * h)) * (double(m.fc_width() + m.ffn()) / (2 * double(m.ffn()))),
      m.seq_length * micro_batch);
  // The dropout masks: Korthikanti's GPT trains with Megatron's default 0.1;
  // the Llama family is trained without dropout (Meta's recipe, Megatron's
  // Llama examples), and a dropout of 0 stores no mask (PyTorch returns
  // its input), so the family counts them only when its config has dropout,
  // and a GPT known to train without it (MPT) not at all.
  const bool masks = stores_dropout_masks(m, gpt_without_dropout);
  double replicated = 8 + (masks ? 2 : 0);
  double split = qkv + 2 + mlp;  // = 24 for GPT with a 4h MLP
  // FP8 (Transformer Engine): a linear layer keeps its input for the weight
  // gradient as the FP8 cast it made (transformer_engine/pytorch/module/
  // linear.py saves inputmat / inputmat_t, 1 byte, when the recipe runs
  // wgrad in FP8; LayerNormLinear likewise its norm output): the qkv and fc
  // GEMMs' inputs (2 + 2 of the replicated), the projection's (2) and the
  // MLP's second GEMM's (2 F / h) take half.
  if (fp8) {
    replicated -= 2;
    split -= 1 + double(m.ffn()) / h;
  }
  // MoE under tp: the routing's tensors are whole on every tp rank (each
  // routes the full token set), neither split nor sequence-parallel. At
  // tp 1 (and for a dense model) the sum above is left as it was.
  const double whole = t > 1 ? moe_whole_activation_units(m) : 0.0;
  split -= whole;
  if (sp) return sbh / t * (replicated + split + scores) + sbh * whole;
  return sbh * (replicated + split / t + scores / t) + sbh * whole;
}

ActShape engine_shape(const GPTConfig& m, int64_t micro_batch, int64_t tp, int64_t layers,
                      bool has_head, bool sequence_parallel, Recompute recompute,
                      Precision precision) {
  // GPT::act_shape's own builder. Only real vocabulary rows get logits; tp
  // rank 0 (the largest slice) holds min(padded / tp, vocab) of them.
  return act_shape_of(m, micro_batch, tp, sequence_parallel, layers, has_head,
                      std::min(m.padded_vocab(tp) / tp, m.vocab_size), recompute, precision);
}

int64_t in_flight_chunks(ScheduleKind kind, int64_t p, int64_t v, int64_t m, int64_t stage) {
  switch (kind) {
    case ScheduleKind::GPipe: return m * v;
    case ScheduleKind::OneFOneB: return std::min(m, p - stage);
    // Each stage's deferred W's keep `stage` more than 1F1B: rank 0's peak everywhere.
    case ScheduleKind::ZeroBubbleH1: return std::min(m, p);
    // Its greedy order's (parallel/schedule_zbv.cpp), per rank: at most its
    // cap, 2 min(m, p) half-size chunks.
    case ScheduleKind::ZeroBubbleV: return zbv_in_flight(p, m, stage);
    case ScheduleKind::Interleaved:
      return std::min(m * v, 2 * (p - stage - 1) + (v - 1) * p + 1);
  }
  return m * v;
}

}  // namespace tessera::plan

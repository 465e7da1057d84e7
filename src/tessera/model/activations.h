// Activations of one micro-batch: everything forward saves for backward, and
// the scratch backward needs, as named views into one arena.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "tessera/config/gpt_config.h"
#include "tessera/core/buffer.h"
#include "tessera/core/profile.h"
#include "tessera/config/parallel_config.h"
#include "tessera/kernels/attention_heads.h"
#include "tessera/kernels/precision.h"

namespace tessera {

// Sizes of one micro-batch on one rank (tp-local widths). Shapes below: N =
// B*T rows, Ns = the rows of the sequence-parallel regions (N without SP).
struct ActShape {
  int64_t B = 1, T = 1;  // micro-batch sequences, tokens per sequence
  int64_t C = 1;         // hidden size
  int64_t NH = 1;        // attention (query) heads on this rank
  int64_t Cl = 1;        // attention width on this rank = NH * head size
  int64_t F = 1;         // MLP width on this rank
  // The Llama family (GPTConfig's switches; GPT-2 by default).
  int64_t KVH = 0;       // key/value heads on this rank (0: NH, plain multi-head)
  bool rmsnorm = false;  // RMSNorm (rstd only, no mean) instead of LayerNorm
  bool swiglu = false;   // the fc GEMM writes [gate | up] (2 F columns)
  float rotary_base = 0;  // RoPE inside attention (0: learned positions)
  float norm_epsilon = 1e-5f;
  int64_t V = 1;         // logit columns on this rank (real vocabulary when tp = 1)
  int64_t L = 1;         // transformer layers on this rank
  bool has_head = true;  // final LayerNorm, logits and loss live here
  // Sequence parallelism: tokens per sequence held in the LayerNorm /
  // residual regions (T / tp); 0 means T (no sequence parallelism). Those
  // regions hold Ns() = B * Ts rows (see tensor_parallel.h for the layout).
  int64_t Ts = 0;
  // What forward keeps for backward (Recompute, config/parallel_config.h). None keeps every
  // view per layer; Selective and Full point the dropped views of every
  // layer at one shared layer's worth of scratch, refilled in backward.
  Recompute recompute = Recompute::None;
  // The storage of the activations that enter or leave a GEMM (the views
  // typed kernels::Act below): fp32, or 16 bits under --bf16 / --fp16.
  Precision precision = Precision::Fp32;

  // Mixture of experts (GPTConfig::num_experts; model/moe_layer.h): E
  // experts per MoE layer (0: none), K per token, each taking at most
  // `capacity` tokens of the micro-batch; the aux and z-loss coefficients.
  int64_t E = 0, K = 0, capacity = 0;
  float moe_aux_coeff = 0, moe_z_coeff = 0;
  // --moe-router-pre-softmax: gates = the full softmax's top-k (not renormalised).
  bool moe_pre_softmax = false;
  // Tokens the aux loss balances over: the micro-batch (N, aux_loss) or
  // each sequence (T, seq_aux_loss), averaged over the groups.
  int64_t moe_aux_group = 0;
  // Which MLP views each local layer slot carves: kDenseMlp and / or
  // kMoeMlp (both when the slot is reused by chunks of both kinds: the
  // virtual pipeline stages' one arena). set_layer_kinds fills it from
  // GPTConfig::moe_layer of the rank's global layers; empty: that rule on
  // layers 0 .. L-1 (the planner's count of a stage's layers).
  static constexpr uint8_t kDenseMlp = 1, kMoeMlp = 2;
  int64_t moe_layer_freq = 1;
  std::vector<uint8_t> mlp_kinds;  // (L) or empty
  // The shared expert of every MoE layer (GPTConfig::moe_shared): its
  // width S on this rank (split over tp as F; 0: none) and whether a
  // sigmoid gate scales its output.
  int64_t S = 0;
  bool shared_gate = false;
  // Expert-parallel ranks (model/expert_parallel.h): above 1 every MoE
  // layer also keeps the expert-side views of EpMoeActs, ep x R rows each.
  int64_t ep = 1;

  int64_t N() const { return B * T; }
  bool moe() const { return E > 0; }
  // The MLP kinds of local layer slot i (0 .. L-1).
  uint8_t mlp_kind(int64_t i) const {
    if (size_t(i) < mlp_kinds.size()) return mlp_kinds[size_t(i)];
    return moe() && GPTConfig::is_moe_layer(i, moe_layer_freq) ? kMoeMlp : kDenseMlp;
  }
  // Some local slot has that kind: only then is its backward scratch (and
  // shared recompute views) carved.
  bool any_mlp_kind(uint8_t kind) const {
    for (int64_t i = 0; i < L; ++i)
      if (mlp_kind(i) & kind) return true;
    return false;
  }
  // Columns of the shared expert's fc GEMM: S, or 2 S under SwiGLU.
  int64_t Sf() const { return swiglu ? 2 * S : S; }
  // Rows of the experts' sorted tokens: every choice (N K) or, under a
  // capacity, at most E full experts.
  int64_t R() const { return std::min(N() * K, E * capacity); }
  int64_t kv_heads() const { return KVH > 0 ? KVH : NH; }
  int64_t head_size() const { return Cl / NH; }
  // Columns of the qkv GEMM on this rank: [q | k | v] = Cl + 2 KVH * hs
  // (3 Cl for GPT-2).
  int64_t Cqkv() const { return Cl + 2 * kv_heads() * head_size(); }
  // Columns of the fc GEMM on this rank: F, or 2 F under SwiGLU.
  int64_t Ff() const { return swiglu ? 2 * F : F; }
  // The attention kernels' description of this rank's heads.
  AttentionHeads heads() const { return {NH, kv_heads(), head_size(), rotary_base}; }
  int64_t Ns() const { return B * (Ts > 0 ? Ts : T); }
  bool sp() const { return Ts > 0 && Ts < T; }
  bool lowp() const { return precision != Precision::Fp32; }
};

// The shape of a micro-batch of B sequences on one tp rank of a model split
// tp ways: tp-local widths, `vocab_columns` logit columns (the rank's real
// vocabulary rows), `layers` layers, T / tp rows per sequence in the
// LayerNorm regions under sequence parallelism (which needs T % tp == 0;
// throws otherwise). GPT::act_shape and the planner (plan/memory_model.h)
// both build theirs here.
ActShape act_shape_of(const GPTConfig& m, int64_t B, int64_t tp, bool sequence_parallel,
                      int64_t layers, bool has_head, int64_t vocab_columns, Recompute recompute,
                      Precision precision);

// One layer's views. Under recompute some of them alias the same scratch in
// every layer (ActShape::recompute says which): valid only between that layer's
// forward (or backward recomputation) and the next layer's.
//
// Precision (ActShape::precision). The kernels::Act views are the GEMMs'
// inputs and outputs: under --bf16 / --fp16 they are stored in 16 bits,
// written so by the kernel that makes them (layernorm, the QKV and fc GEMMs,
// attention, GELU) and read so by the next GEMM and by backward (dW), so no
// GEMM casts an activation. The float* views stay fp32 in every precision:
//   - LayerNorm statistics (mean, rstd) and the attention lse: fp32
//     statistics, as Megatron keeps them (its fused kernels return fp32
//     mean / invvar and softmax stats).
//   - The residual stream res_mid / res_out (and the embeddings, `encoded`):
//     every layer adds its branch into it, so a 16-bit stream would round
//     once per layer and lose the small updates of deep layers. Megatron
//     stores it in bf16 by default and offers --fp32-residual-connection;
//     we keep the fp32 form. It is 2 of a layer's 16 row-widths of C (tp
//     1, no recompute: ln1 1, qkv 3, atty 1, res_mid 1, ln2 1, fch 4,
//     fch_gelu 4, res_out 1), so a layer's bytes per token fall from 64·C
//     to 36·C rather than 32·C; it is also what the pipeline sends, and
//     the hidden dropout and LayerNorm read it in fp32. activations_bytes
//     counts it at 4 bytes.
// Under RMSNorm the *_mean views are null (it keeps rstd only). Cqkv, Ff:
// ActShape's (3 Cl and F for GPT-2).
// An MoE layer's views (model/moe_layer.h), kept from forward to backward
// in every recompute mode (a full recomputation rewrites them with the
// same values). R: ActShape::R(); rows sorted by expert, then token.
struct MoeActs {
  float* logits = nullptr;     // (N, E) router logits, fp32
  int32_t* idx = nullptr;      // (N, K) chosen experts
  float* gates = nullptr;      // (N, K) their softmax weights
  int32_t* slot = nullptr;     // (N, K) row in the sorted rows, -1: dropped
  int32_t* counts = nullptr;   // (E) rows per expert
  float* stats = nullptr;      // (kMoeStats + E) kernels/moe_stats.h
  // The shared expert (ActShape::S > 0; model/moe_shared_expert.h).
  kernels::Act sh_h;             // (N, Sf) its fc output
  kernels::Act sh_act;           // (N, S) its activation
  float* sh_y = nullptr;         // (N, C) fp32 its output (kept only under the gate)
  float* sh_gate = nullptr;      // (N) sigmoid(ln2 . w_gate) (gate only)
  kernels::Act xs;             // (R, C) the tokens' ln2 rows, sorted
  kernels::Act h;              // (R, Ff) the experts' fc output
  kernels::Act act;            // (R, F) GELU(h), or silu(gate) * up
  float* ys = nullptr;         // (R, C) the experts' output rows, fp32 (the gates' gradient reads them)
};

struct ExpertParallel;  // model/expert_parallel.h

// Expert parallelism's scratch (model/expert_parallel.h), shared by every
// MoE layer: Rx = ep x R rows each.
struct EpMoeScratch {
  float* xfer = nullptr;  // (Rx, C) rows as exchanged (source-major)
  float* dye = nullptr;   // (Rx, C) dL/d the experts' output rows (forward: the rows themselves)
  float* dact = nullptr;  // (Rx, F)
  float* dh = nullptr;    // (Rx, Ff)
  float* dxe = nullptr;   // (Rx, C)
};

// An MoE layer's expert-side views under expert parallelism, kept from
// forward to backward (the source side stays in MoeActs): rows received
// for this rank's experts, expert-major, then by source rank. `ep` and
// `scratch` are set by the model before each forward (null: no expert
// parallelism, the layer runs all its experts itself). xe, h and act are
// carved fp32-sized; under --bf16 / --fp16 they hold 16-bit rows, as
// MoeActs' xs, h and act, in their first half (model/expert_parallel.cpp).
struct EpMoeActs {
  const ExpertParallel* ep = nullptr;
  const EpMoeScratch* scratch = nullptr;
  float* all_counts = nullptr;  // (ep, E) every rank's rows per expert, as floats (exact)
  float* xe = nullptr;          // (Rx, C) the received ln2 rows
  float* h = nullptr;           // (Rx, Ff) the local experts' fc output
  float* act = nullptr;         // (Rx, F) GELU(h) or SwiGLU(h)
};

struct LayerActs {
  kernels::Act ln1;           // (Ns, C)
  float* ln1_mean = nullptr;  // (Ns) LayerNorm only
  float* ln1_rstd = nullptr;  // (Ns)
  kernels::Act qkv;           // (B, T, Cqkv) [q | k | v], unrotated (RoPE runs inside attention)
  kernels::Act atty;          // (B, T, Cl) attention output before projection
  float* lse = nullptr;       // (B, NH, T) attention row log-sum-exp
  float* res_mid = nullptr;   // (Ns, C) residual after attention
  kernels::Act ln2;           // (Ns, C)
  float* ln2_mean = nullptr;  // (Ns) LayerNorm only
  float* ln2_rstd = nullptr;  // (Ns)
  kernels::Act fch;           // (B, T, Ff) MLP pre-activation ([gate | up] under SwiGLU)
  kernels::Act fch_gelu;      // (B, T, F) GELU(fch), or silu(gate) * up under SwiGLU
  float* res_out = nullptr;   // (Ns, C) layer output
  MoeActs moe;                // an MoE layer's routing and experts (null views without MoE)
  EpMoeActs ep_moe;           // its expert side under expert parallelism (null views without)
};

// Where one micro-batch's dropout masks come from (kernels/dropout_site.h):
// with `training` false (evaluation, the default) no dropout runs.
// first_sample is the global index of the micro-batch's sequence 0 (the
// trainer's sample numbering), which with the step makes every mask the
// single process's whatever the layout.
struct DropoutContext {
  bool training = false;
  uint64_t seed = 0;
  int64_t step = 0;
  int64_t first_sample = 0;
};

// The MoE routing statistics of a step, summed over its micro-batches:
// per rank layer, the (kMoeStats + E) stats of kernels/moe_stats.h (empty
// for a dense layer). The trainer points Activations::moe_sums here to
// collect them (train/moe_metrics.h); the model only adds.
struct MoeStepSums {
  std::vector<std::vector<double>> layers;
  void add(size_t layer, const float* stats, int64_t n) {
    if (layers.size() <= layer) layers.resize(layer + 1);
    std::vector<double>& l = layers[layer];
    l.resize(size_t(n), 0.0);
    for (int64_t i = 0; i < n; ++i) l[size_t(i)] += stats[i];
  }
  void clear() { layers.clear(); }
};

struct Activations {
  ActShape s;
  MoeStepSums* moe_sums = nullptr;  // where forward adds its MoE layers' stats (null: nowhere)
  DropoutContext dropout;  // set by the caller before each micro-batch's forward and backward
  // Set by the caller before a backward: true for the step's first backward
  // through these layers, when every weight gradient it writes still holds
  // the zeros the optimizer left. Its dW GEMMs then write the gradient
  // instead of reading and adding to it (the same values: 0 + x = x; under
  // bf16 the read of fp32 gradients is a large part of a dW GEMM at a
  // micro-batch's 256 rows). Biases, LayerNorms and the embedding's
  // scatter-add still add (the tied wte: the LM head's GEMM runs first).
  bool first_backward_of_step = false;
  Buffer arena;
  Profile* profile = nullptr;  // optional: where the time of this micro-batch goes
  float* encoded = nullptr;  // (Ns, C) embeddings, input of the first layer
  std::vector<LayerActs> layers;
  kernels::Act lnf;           // (Ns, C) 16-bit under --bf16 / --fp16 (the LM head's input)
  float* lnf_mean = nullptr;  // (Ns) LayerNorm only
  float* lnf_rstd = nullptr;  // (Ns)
  // (B, T, V) fp32 in every precision (the loss reads them, and dlogits,
  // a gradient, overwrite them in place in backward).
  float* logits = nullptr;
  float* ce_lse = nullptr;    // (B, T) log-sum-exp of each logit row
  float* losses = nullptr;    // (B, T)
  float* ce_sums = nullptr;   // (2, B, T) vocab-parallel loss: sum-exp and target logit, reduced over tp
  // Backward scratch, reused layer after layer.
  float* dresid = nullptr;  // (Ns, C) gradient of the residual stream
  float* dln = nullptr;     // (B, T, C) full rows: a column-parallel linear's input gradient
  // SP only: (B, T, C) all-gathered rows (LayerNorm output entering a
  // column-parallel linear, 16-bit words in its first half under --bf16 /
  // --fp16, or a row-parallel linear's partial output).
  float* tp_full = nullptr;
  float* dqkv = nullptr;    // (B, T, Cqkv)
  float* datty = nullptr;   // (B, T, Cl)
  float* dfch = nullptr;    // (B, T, Ff): dL/d fch (GELU: first dL/d fch_gelu, in place)
  float* dact = nullptr;    // (B, T, F) SwiGLU only: dL/d fch_gelu (its input gradient is 2F wide)
  // MoE only (model/moe_layer.cpp): the experts' backward scratch.
  float* moe_dys = nullptr;     // (R, C) dL/d ys
  float* moe_dact = nullptr;    // (R, F) dL/d act
  float* moe_dh = nullptr;      // (R, Ff) dL/d h
  float* moe_dxs = nullptr;     // (R, C) dL/d xs
  float* moe_dgates = nullptr;  // (N, K)
  float* moe_dlogits = nullptr; // (N, E)
  // The shared expert's backward scratch (ActShape::S > 0).
  float* moe_sh_dy = nullptr;     // (N, C) dL/d its output (gate only; in the GEMM precision)
  float* moe_sh_dact = nullptr;   // (N, S) dL/d sh_act
  float* moe_sh_dh = nullptr;     // (N, Sf) dL/d sh_h (fp32-sized, used in its precision)
  float* moe_sh_dgate = nullptr;  // (N) dL/d the gate's logit (gate only)
  float* moe_sh_y = nullptr;      // (N, C) its output when no gate keeps it (forward scratch)
  EpMoeScratch ep_scratch;      // expert parallelism only (s.ep > 1)
  // Set by the model before a backward: d(loss being minimised)/d(a
  // micro-batch's mean-over-tokens loss), dloss * N, what the MoE layers'
  // aux and z-losses are scaled by (they are means over the micro-batch).
  float moe_loss_scale = 0;

  // Input of layer i (the embeddings for i = 0).
  float* layer_input(size_t i) const { return i == 0 ? encoded : layers[i - 1].res_out; }
  float* output() const { return layers.empty() ? encoded : layers.back().res_out; }
  int64_t bytes() const { return int64_t(arena.nbytes()); }
};

// Allocate one arena and carve every view out of it.
void activations_init(Activations& a, const ActShape& s);
// The same, but the scratch views (backward scratch, tp_full, and the
// recomputed layer's views) come from `scratch`
// (activations_scratch_bytes(s) bytes), which micro-batches in flight
// together may share: a forward or backward call must finish before another
// micro-batch's starts. The arena then holds only the saved views.
void activations_init(Activations& a, const ActShape& s, float* scratch);

// The views of activations_init laid out from `base` (activations_bytes(s)
// bytes, saved views then scratch) without allocating: the op trace
// (model/op_trace.h) places them at an address the tracing backend never
// reads, so a 175B model's micro-batch costs no memory to trace.
void activations_place(Activations& a, const ActShape& s, char* base);
// Bytes activations_init will allocate for `s` (the planner and the memory
// report use the same count) = saved + scratch. Every view is rounded up to
// 64 bytes; 16-bit views (s.precision not fp32) count 2 bytes an element.
int64_t activations_bytes(const ActShape& s);

// s.mlp_kinds from the rank's global layers (ParamLayout::layers, in
// execution order) split into `chunks` equal chunks that share one arena:
// slot i carves what chunk k's layer k L / chunks + i needs, for every k.
void set_layer_kinds(ActShape& s, const GPTConfig& m, const std::vector<int64_t>& layers,
                     int64_t chunks = 1);
// What must live from a micro-batch's forward to its backward.
int64_t activations_saved_bytes(const ActShape& s);
// What is needed only while one forward or backward runs.
int64_t activations_scratch_bytes(const ActShape& s);

}  // namespace tessera

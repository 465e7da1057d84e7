// Activations of one micro-batch: everything forward saves for backward, and
// the scratch backward needs, as named views into one arena.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/core/buffer.h"
#include "tessera/core/profile.h"
#include "tessera/config/parallel_config.h"

namespace tessera {

// Sizes of one micro-batch on one rank (tp-local widths). Shapes below: N =
// B*T rows, Ns = the rows of the sequence-parallel regions (N without SP).
struct ActShape {
  int64_t B = 1, T = 1;  // micro-batch sequences, tokens per sequence
  int64_t C = 1;         // hidden size
  int64_t NH = 1;        // attention heads on this rank
  int64_t Cl = 1;        // attention width on this rank = NH * head size
  int64_t F = 1;         // MLP width on this rank
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

  int64_t N() const { return B * T; }
  int64_t Ns() const { return B * (Ts > 0 ? Ts : T); }
  bool sp() const { return Ts > 0 && Ts < T; }
};

// One layer's views. Under recompute some of them alias the same scratch in
// every layer (ActShape::recompute says which): valid only between that layer's
// forward (or backward recomputation) and the next layer's.
struct LayerActs {
  float* ln1 = nullptr;       // (Ns, C)
  float* ln1_mean = nullptr;  // (Ns)
  float* ln1_rstd = nullptr;  // (Ns)
  float* qkv = nullptr;       // (B, T, 3*Cl)
  float* atty = nullptr;      // (B, T, Cl) attention output before projection
  float* lse = nullptr;       // (B, NH, T) attention row log-sum-exp
  float* res_mid = nullptr;   // (Ns, C) residual after attention
  float* ln2 = nullptr;       // (Ns, C)
  float* ln2_mean = nullptr;  // (Ns)
  float* ln2_rstd = nullptr;  // (Ns)
  float* fch = nullptr;       // (B, T, F) MLP pre-activation
  float* fch_gelu = nullptr;  // (B, T, F)
  float* res_out = nullptr;   // (Ns, C) layer output
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

struct Activations {
  ActShape s;
  DropoutContext dropout;  // set by the caller before each micro-batch's forward and backward
  Buffer arena;
  Profile* profile = nullptr;  // optional: where the time of this micro-batch goes
  float* encoded = nullptr;  // (Ns, C) embeddings, input of the first layer
  std::vector<LayerActs> layers;
  float* lnf = nullptr;       // (Ns, C)
  float* lnf_mean = nullptr;  // (Ns)
  float* lnf_rstd = nullptr;  // (Ns)
  float* logits = nullptr;    // (B, T, V); overwritten in place by dlogits in backward
  float* ce_lse = nullptr;    // (B, T) log-sum-exp of each logit row
  float* losses = nullptr;    // (B, T)
  float* ce_sums = nullptr;   // (2, B, T) vocab-parallel loss: sum-exp and target logit, reduced over tp
  // Backward scratch, reused layer after layer.
  float* dresid = nullptr;  // (Ns, C) gradient of the residual stream
  float* dln = nullptr;     // (B, T, C) full rows: a column-parallel linear's input gradient
  // SP only: (B, T, C) all-gathered rows (LayerNorm output entering a
  // column-parallel linear, or a row-parallel linear's partial output).
  float* tp_full = nullptr;
  float* dqkv = nullptr;    // (B, T, 3*Cl)
  float* datty = nullptr;   // (B, T, Cl)
  float* dfch = nullptr;    // (B, T, F)

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

// Bytes activations_init will allocate for `s` (the planner and the memory
// report use the same count) = saved + scratch.
int64_t activations_bytes(const ActShape& s);
// What must live from a micro-batch's forward to its backward.
int64_t activations_saved_bytes(const ActShape& s);
// What is needed only while one forward or backward runs.
int64_t activations_scratch_bytes(const ActShape& s);

}  // namespace tessera

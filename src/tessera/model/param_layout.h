// ParamLayout: the one source of truth for where every parameter lives.
//
// Built from (model config, parallel config, this rank's tp and pp
// coordinates): each parameter's name, global shape, the slice this rank
// owns, and its offset in the rank's flat buffer. Parameters, gradients and
// optimizer moments are flat buffers with this layout; ZeRO shards them by
// offset arithmetic, checkpoints record it, the planner counts bytes with it.
//
// Order in the flat buffer: embeddings (first stage), then each transformer
// layer's parameters contiguously, then the final norm and, when untied, the
// LM head (last stage). Under pipeline parallelism the last stage of a tied
// model also holds a copy of the token embedding. (Under zbv's V placement
// rank 0 holds the first and the last chunk: the embeddings and the head,
// one token table.)
//
// The Llama family (GPTConfig's switches) changes the list, never the
// names: no *.bias of an RMSNorm norm, no linear biases under
// --disable-bias-linear, no wpe under rope, qkv (qkv_width, C) under GQA, fc
// (2F, C) under SwiGLU, and "lm_head.weight" (padded vocab, C; vocab split)
// under --untie-embeddings-and-output-weights.
//
// An MoE layer (GPTConfig::moe_layer) holds mlp.router.weight (E, C) and
// its experts stacked, mlp.experts.fc.weight (E, Ff, C) (+ bias (E, Ff)) and
// mlp.experts.proj.weight (E, C, F) (+ bias (E, C)), in place of the mlp.*.
// Under tensor parallelism each expert splits as the dense MLP does (fc by
// its Ff rows, [gate | up] parts under SwiGLU, proj by its F columns:
// ParamEntry::lead), the router and the proj bias are replicated, and so
// is the shared expert's gate; the shared expert's fc and proj split as
// the dense MLP's.
//
// Under expert parallelism (ParallelConfig::ep > 1) each rank holds only
// its E / ep experts of every stack: local (E / ep, ...), experts
// [ep_rank E / ep, (ep_rank + 1) E / ep) of the global (E, ...) tensor
// (ParamEntry::ep_split, expert_begin), as Megatron-Core keeps them.
//
// Units: the buffer is cut into units — the embeddings, each layer, the
// final LayerNorm — each starting on a multiple of `unit_align` elements and
// padded up to one (the padding is never a parameter and stays zero). An
// MoE layer has two: its dense parameters (attention, norms, router, shared
// expert), then its routed experts' stacks (ParamUnit::expert), which
// DataParallel reduces and ZeRO shards over the expert-data-parallel group
// (dp x cp / ep ranks holding the same experts) instead of dp x cp. ZeRO
// shards every unit over its group (rank r owns the r-th of its equal
// slices), gathers a layer's units before its forward under ZeRO-3, and
// reduces a unit's gradients as soon as backward has finished it, all in
// place and without copies because the unit divides by either group.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/shape.h"
#include "tessera/config/gpt_config.h"
#include "tessera/config/parallel_config.h"

namespace tessera {

// How a parameter is split over the tensor-parallel ranks.
enum class TpSplit {
  None,    // replicated (LayerNorm, row-parallel biases, position embedding)
  Column,  // dim 0 (output features) split: QKV, MLP up-projection and their biases
  Row,     // dim 1 (input features) split: attention output and MLP down-projection
  Vocab,   // dim 0 (vocabulary rows) split: token embedding / LM head
};

struct ParamUnit {
  int64_t begin = 0, end = 0;  // [begin, end) in the flat buffer, end - begin a multiple of unit_align
  int64_t layer = -1;          // the transformer layer, or -1 (embeddings, final norm)
  // An MoE layer's routed experts (their stacks alone): reduced and sharded
  // over the expert-data-parallel group, not dp x cp.
  bool expert = false;
  int64_t numel() const { return end - begin; }
};

struct ParamEntry {
  std::string name;     // e.g. "h.3.attn.qkv.weight"
  Shape global_shape;   // the whole tensor, as one process holds it
  Shape local_shape;    // this rank's slice
  TpSplit split = TpSplit::None;
  // A dim-0 split (Column, Vocab) may cut dim 0 into parts, each split over
  // tp on its own, so every rank holds its slice of each part, in part
  // order: split_parts lists the parts' global rows (empty: one part, the
  // whole dim). GPT's QKV has three equal parts (q, k, v: C rows each); the
  // Llama family's has unequal ones under GQA (NH*hs, KVH*hs, KVH*hs), and
  // its SwiGLU fc two (gate and up: F rows each).
  std::vector<int64_t> split_parts;
  // Leading dims the split skips: 1 for the experts' stacks of an MoE
  // layer ((E, Ff, C), (E, C, F), (E, Ff)), each expert's matrix split over
  // tp as the dense MLP's (Megatron's experts under tensor parallelism),
  // so the split (and its parts) sits on dim lead or lead + 1.
  int lead = 0;
  // A routed expert stack (E, ...): dim 0 split over the expert-parallel
  // ranks, this rank holding experts [expert_begin, expert_begin + E / ep).
  bool ep_split = false;
  int64_t expert_begin = 0;
  int64_t offset = 0;   // first element in the rank's flat buffer
  int64_t layer = -1;   // global transformer layer, -1 for embeddings / final norm
  bool weight_decay = false;  // matrices and embeddings decay; biases and LayerNorm do not

  int64_t numel() const { return local_shape.numel(); }
  int split_dim() const { return lead + (split == TpSplit::Row ? 1 : 0); }
  // The parts of a Column / Vocab split's dim (split_dim()): how many, and
  // part j's first global row and rows.
  int64_t part_count() const { return split_parts.empty() ? 1 : int64_t(split_parts.size()); }
  int64_t part_rows(int64_t j) const {
    return split_parts.empty() ? global_shape[split_dim()] : split_parts[size_t(j)];
  }
  int64_t part_begin(int64_t j) const {
    int64_t b = 0;
    for (int64_t i = 0; i < j; ++i) b += part_rows(i);
    return b;
  }
};

class ParamLayout {
 public:
  // ep_rank: the rank in the expert-parallel group (par.ep ranks), which
  // picks the experts held; every ep rank's layout has the same sizes.
  static ParamLayout build(const GPTConfig& model, const ParallelConfig& par, int64_t tp_rank,
                           int64_t pp_rank, int64_t ep_rank = 0);

  const std::vector<ParamEntry>& entries() const { return entries_; }
  const ParamEntry& find(const std::string& name) const;
  bool contains(const std::string& name) const;
  // Elements of the flat buffer, unit padding included.
  int64_t numel() const { return numel_; }
  // Parameters this rank holds (no padding of any kind).
  int64_t param_count() const;
  const std::vector<ParamUnit>& units() const { return units_; }
  // Every unit's size is a multiple of this: 16 (one 64-byte line) x dp x
  // cp, which the expert-data-parallel size dp x cp / ep divides too.
  int64_t unit_align() const { return unit_align_; }
  // Expert-parallel ranks the expert stacks are split over, and this one.
  int64_t ep() const { return ep_; }
  int64_t ep_rank() const { return ep_rank_; }
  // Elements of the flat buffer in expert units, padding included.
  int64_t expert_numel() const;

  // Transformer layers held by this rank (global indices, ascending).
  const std::vector<int64_t>& layers() const { return layers_; }
  bool has_embedding() const { return has_embedding_; }
  bool has_head() const { return has_head_; }  // final norm, LM head (tied or lm_head.weight), loss
  int64_t tp() const { return tp_; }
  int64_t tp_rank() const { return tp_rank_; }
  int64_t padded_vocab() const { return padded_vocab_; }
  // Rows [vocab_begin, vocab_end) of the padded token table held by this rank.
  int64_t vocab_begin() const { return vocab_begin_; }
  int64_t vocab_end() const { return vocab_begin_ + padded_vocab_ / tp_; }

  // Position in the global tensor (row-major flat index) of element `local`
  // of this rank's slice of `e`. Initialisation draws by global index, so
  // every layout starts from the same weights.
  int64_t global_index(const ParamEntry& e, int64_t local) const;

  // Parameters of the whole model (one copy, no padding rows), from the
  // config alone: the number every report quotes.
  static int64_t count_model_params(const GPTConfig& model);

 private:
  void add(const std::string& name, Shape global, TpSplit split, int64_t layer, bool decay,
           std::vector<int64_t> parts = {}, int lead = 0);
  // Pads the unit begun at the last close and records it.
  void close_unit(int64_t layer, bool expert = false);

  std::vector<ParamEntry> entries_;
  std::vector<int64_t> layers_;
  std::vector<ParamUnit> units_;
  int64_t numel_ = 0;
  int64_t unit_align_ = 16;
  int64_t tp_ = 1, tp_rank_ = 0, padded_vocab_ = 0, vocab_begin_ = 0;
  int64_t ep_ = 1, ep_rank_ = 0;
  bool has_embedding_ = false, has_head_ = false;
};

// The layers held by pipeline stage `pp_rank`: contiguous (the split of
// ParallelConfig::stage_layer_count, uniform unless the first / last stage
// sizes are set); with virtual stages each rank holds `virtual_stages`
// non-contiguous chunks of equal size (interleaved: round robin; zbv: the V,
// config/chunk_placement.h), ascending.
std::vector<int64_t> stage_layers(const GPTConfig& model, const ParallelConfig& par,
                                  int64_t pp_rank);

}  // namespace tessera

#include "tessera/model/param_layout.h"

#include <fmt/format.h>

namespace tessera {

std::vector<int64_t> stage_layers(const GPTConfig& m, const ParallelConfig& par, int64_t pp_rank) {
  // Chunk c of the model (pp * v chunks in all) goes where the schedule's
  // placement puts it: rank c % pp (with v = 1 a contiguous block per stage,
  // with v > 1 Megatron's interleaved assignment) or zbv's V (rank r: chunks
  // r and 2 pp - 1 - r); the uneven split, if any, is ParallelConfig's.
  return par.stage_layer_list(m.num_layers, pp_rank);
}

void ParamLayout::add(const std::string& name, Shape global, TpSplit split, int64_t layer,
                      bool decay, std::vector<int64_t> parts, int lead) {
  ParamEntry e;
  e.name = name;
  e.global_shape = global;
  e.local_shape = global;
  e.split = split;
  e.split_parts = std::move(parts);
  e.lead = lead;
  if (split != TpSplit::None) {
    int d = e.split_dim();
    TESSERA_CHECK(global[d] % tp_ == 0, "parameter {} dim {} ({}) does not split over tp {}",
                  name, d, global[d], tp_);
    for (int64_t j = 0; j < e.part_count(); ++j)
      TESSERA_CHECK(e.part_rows(j) % tp_ == 0,
                    "parameter {} part {} ({} rows) does not split over tp {}", name, j,
                    e.part_rows(j), tp_);
    e.local_shape[d] = global[d] / tp_;
  }
  if (lead == 1 && ep_ > 1) {
    // A routed expert stack: this rank's E / ep experts of it.
    TESSERA_CHECK(global[0] % ep_ == 0, "parameter {}: {} experts do not split over ep {}", name,
                  global[0], ep_);
    e.ep_split = true;
    e.local_shape[0] = global[0] / ep_;
    e.expert_begin = ep_rank_ * e.local_shape[0];
  }
  e.offset = numel_;
  e.layer = layer;
  e.weight_decay = decay;
  numel_ += e.numel();
  entries_.push_back(std::move(e));
}

void ParamLayout::close_unit(int64_t layer, bool expert) {
  const int64_t begin = units_.empty() ? 0 : units_.back().end;
  if (numel_ == begin) return;  // nothing added since the last unit
  numel_ = (numel_ + unit_align_ - 1) / unit_align_ * unit_align_;
  units_.push_back({begin, numel_, layer, expert});
}

int64_t ParamLayout::expert_numel() const {
  int64_t n = 0;
  for (const ParamUnit& u : units_)
    if (u.expert) n += u.numel();
  return n;
}

int64_t ParamLayout::param_count() const {
  int64_t n = 0;
  for (const auto& e : entries_) n += e.numel();
  return n;
}

ParamLayout ParamLayout::build(const GPTConfig& m, const ParallelConfig& par, int64_t tp_rank,
                               int64_t pp_rank, int64_t ep_rank) {
  ParamLayout L;
  L.tp_ = par.tp;
  L.ep_ = m.moe() ? par.ep : 1;
  TESSERA_CHECK(ep_rank >= 0 && ep_rank < L.ep_, "ep rank {} of {}", ep_rank, L.ep_);
  L.ep_rank_ = ep_rank;
  // ZeRO shards each unit over dp x cp, an expert unit over dp x cp / ep.
  L.unit_align_ = 16 * par.dp * par.cp;
  L.tp_rank_ = tp_rank;
  L.padded_vocab_ = m.padded_vocab(par.tp);
  L.vocab_begin_ = tp_rank * (L.padded_vocab_ / par.tp);
  L.layers_ = stage_layers(m, par, pp_rank);
  // The ranks of the first and the last global chunk: stages 0 and pp - 1,
  // or both rank 0 under zbv's V (one table, no copy: its gradient sums locally).
  const int64_t chunks = par.pp * par.virtual_stages;
  L.has_embedding_ = pp_rank == chunk_rank(par.pp, 0, par.placement());
  L.has_head_ = pp_rank == chunk_rank(par.pp, chunks - 1, par.placement());
  const int64_t C = m.hidden_size, F = m.ffn();
  const int64_t hs = m.head_size(), Cq = m.num_heads * hs, Ckv = m.kv_heads() * hs;
  const bool norm_bias = !m.rmsnorm(), bias = m.add_bias_linear;
  const bool tied = !m.untie_embeddings;
  // [q | k | v] rows, each part split over tp (GPT: three equal parts).
  const std::vector<int64_t> qkv_parts = {Cq, Ckv, Ckv};
  // SwiGLU: [gate | up], each split over tp; plain MLP: one part.
  const std::vector<int64_t> fc_parts =
      m.swiglu ? std::vector<int64_t>{F, F} : std::vector<int64_t>{};

  // A tied model's last stage needs the token table for the LM head even
  // when it does not embed; its gradient is summed with the first stage's
  // each step.
  if (L.has_embedding_ || (tied && L.has_head_))
    L.add("wte", {L.padded_vocab_, C}, TpSplit::Vocab, -1, true);
  if (L.has_embedding_ && !m.rope()) L.add("wpe", {m.positions(), C}, TpSplit::None, -1, true);
  L.close_unit(-1);
  for (int64_t l : L.layers_) {
    auto n = [l](const char* s) { return fmt::format("h.{}.{}", l, s); };
    L.add(n("ln_1.weight"), {C}, TpSplit::None, l, false);
    if (norm_bias) L.add(n("ln_1.bias"), {C}, TpSplit::None, l, false);
    L.add(n("attn.qkv.weight"), {m.qkv_width(), C}, TpSplit::Column, l, true, qkv_parts);
    if (m.qkv_bias()) L.add(n("attn.qkv.bias"), {m.qkv_width()}, TpSplit::Column, l, false, qkv_parts);
    L.add(n("attn.proj.weight"), {C, Cq}, TpSplit::Row, l, true);
    if (bias) L.add(n("attn.proj.bias"), {C}, TpSplit::None, l, false);
    L.add(n("ln_2.weight"), {C}, TpSplit::None, l, false);
    if (norm_bias) L.add(n("ln_2.bias"), {C}, TpSplit::None, l, false);
    if (m.moe_layer(l)) {
      // The router and the shared expert (dense state of the layer's unit),
      // then E experts, each an MLP of the dense one's shapes, stacked on a
      // leading expert dim in a unit of their own (split over ep, and over
      // tp as the dense MLP: lead 1, the tp split skips the expert dim).
      // The router and the experts' proj bias (added once, by tp rank 0)
      // are replicated over tp.
      const int64_t E = m.num_experts;
      L.add(n("mlp.router.weight"), {E, C}, TpSplit::None, l, true);
      if (m.moe_shared()) {
        // The shared expert: a dense MLP of width S beside the routed ones,
        // split over tp as the dense MLP is; its gate (1, C) replicated.
        const int64_t S = m.moe_shared_expert_intermediate_size;
        const std::vector<int64_t> sh_parts =
            m.swiglu ? std::vector<int64_t>{S, S} : std::vector<int64_t>{};
        L.add(n("mlp.shared_expert.fc.weight"), {m.moe_shared_fc_width(), C}, TpSplit::Column, l,
              true, sh_parts);
        if (bias)
          L.add(n("mlp.shared_expert.fc.bias"), {m.moe_shared_fc_width()}, TpSplit::Column, l,
                false, sh_parts);
        L.add(n("mlp.shared_expert.proj.weight"), {C, S}, TpSplit::Row, l, true);
        if (bias) L.add(n("mlp.shared_expert.proj.bias"), {C}, TpSplit::None, l, false);
        if (m.moe_shared_expert_gate)
          L.add(n("mlp.shared_expert_gate.weight"), {1, C}, TpSplit::None, l, true);
      }
      L.close_unit(l);
      L.add(n("mlp.experts.fc.weight"), {E, m.fc_width(), C}, TpSplit::Column, l, true, fc_parts,
            1);
      if (bias)
        L.add(n("mlp.experts.fc.bias"), {E, m.fc_width()}, TpSplit::Column, l, false, fc_parts,
              1);
      L.add(n("mlp.experts.proj.weight"), {E, C, F}, TpSplit::Row, l, true, {}, 1);
      if (bias) L.add(n("mlp.experts.proj.bias"), {E, C}, TpSplit::None, l, false, {}, 1);
      L.close_unit(l, /*expert=*/true);
      continue;
    }
    L.add(n("mlp.fc.weight"), {m.fc_width(), C}, TpSplit::Column, l, true, fc_parts);
    if (bias) L.add(n("mlp.fc.bias"), {m.fc_width()}, TpSplit::Column, l, false, fc_parts);
    L.add(n("mlp.proj.weight"), {C, F}, TpSplit::Row, l, true);
    if (bias) L.add(n("mlp.proj.bias"), {C}, TpSplit::None, l, false);
    L.close_unit(l);
  }
  if (L.has_head_) {
    L.add("ln_f.weight", {C}, TpSplit::None, -1, false);
    if (norm_bias) L.add("ln_f.bias", {C}, TpSplit::None, -1, false);
    if (!tied) L.add("lm_head.weight", {L.padded_vocab_, C}, TpSplit::Vocab, -1, true);
    L.close_unit(-1);
  }
  return L;
}

const ParamEntry& ParamLayout::find(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return e;
  fail("no parameter named '{}' on this rank", name);
}

bool ParamLayout::contains(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return true;
  return false;
}

int64_t ParamLayout::global_index(const ParamEntry& e, int64_t local) const {
  const bool tp_split = e.split != TpSplit::None && tp_ > 1;
  if (!tp_split && !e.ep_split) return local;
  // Local coordinates in the local shape (1-D to 3-D), then the split dims'
  // ones moved to their global place, then the global row-major index.
  const int nd = e.local_shape.ndim, d = e.split_dim();
  int64_t coord[Shape::kMaxDims] = {};
  for (int k = nd - 1; k >= 0; --k) {
    coord[k] = local % e.local_shape[k];
    local /= e.local_shape[k];
  }
  if (e.ep_split) coord[0] += e.expert_begin;  // this rank's experts of the stack
  if (!tp_split) {
  } else if (e.split == TpSplit::Row) {
    coord[d] += tp_rank_ * e.local_shape[d];
  } else {
    // The split dim is parts, each split into tp equal slices; the local
    // rows are this rank's slice of each part in turn.
    int64_t j = 0, within = coord[d];
    while (within >= e.part_rows(j) / tp_) within -= e.part_rows(j++) / tp_;
    coord[d] = e.part_begin(j) + tp_rank_ * (e.part_rows(j) / tp_) + within;
  }
  int64_t g = 0;
  for (int k = 0; k < nd; ++k) g = g * e.global_shape[k] + coord[k];
  return g;
}

int64_t ParamLayout::count_model_params(const GPTConfig& m) {
  // Counted from the one-process layout itself, less the vocabulary padding
  // rows, so this number can never drift from what the engine allocates.
  ParamLayout one = build(m, ParallelConfig{}, 0, 0);
  const int64_t tables = m.untie_embeddings ? 2 : 1;  // wte, and lm_head when untied
  return one.param_count() - tables * (one.padded_vocab() - m.vocab_size) * m.hidden_size;
}

}  // namespace tessera

#include "tessera/model/gpt.h"

#include <algorithm>

#include "tessera/kernels/cpu_backend_info.h"
#include "tessera/kernels/moe_stats.h"
#include "tessera/model/block.h"

namespace tessera {

GPT::GPT(const GPTConfig& config, const ParamLayout& layout, const GPTOptions& options)
    : config_(config),
      layout_(layout),
      tp_(options.tp),
      cp_(options.cp),
      ep_(options.ep),
      recompute_(options.recompute),
      backend_(options.backend ? options.backend : &kernels::cpu_backend()) {
  TESSERA_CHECK(tp_.size() == layout_.tp(),
                "GPT: tensor-parallel group of {} ranks for a layout split over tp {}", tp_.size(),
                layout_.tp());
  TESSERA_CHECK(!ep_.active() || (config_.moe() && config_.num_experts % ep_.size() == 0),
                "GPT: {} experts over an expert-parallel group of {} ranks", config_.num_experts,
                ep_.size());
  // The layout holds this rank's E / ep experts: the group that exchanges
  // their tokens must be that split (and this rank the one it was built for).
  TESSERA_CHECK(ep_.size() == layout_.ep() && ep_.rank() == layout_.ep_rank(),
                "GPT: expert-parallel rank {} of {} for a layout of expert rank {} of {}",
                ep_.rank(), ep_.size(), layout_.ep_rank(), layout_.ep());
  if (options.own_params) {
    params_.allocate(layout.numel());
    w_ = bind_weights(layout_, params_.f32());
  }
  if (options.own_grads) {
    grads_.allocate(layout.numel());
    g_ = bind_weights(layout_, grads_.f32());
  }
  w_.layers.resize(layout.layers().size());
  g_.layers.resize(layout.layers().size());
  if (tp_.sp()) ln_grads_.allocate(4 * config_.hidden_size);  // (4, C): two norms' w and b
  // The working copy's binding: over params() when they are here; under
  // ZeRO-3 each bound unit brings its own.
  lowp_.precision = options.precision;
  if (!lowp_.active() || params_.numel() == 0) return;
  lowp_copy_.assign(size_t(layout_.numel()), 0);
  lowp_.bind(params_.f32(), params_.numel(), lowp_copy_.data());
}

void GPT::bind_unit(const ParamUnit& unit, float* unit_base, float* grad_base,
                    const uint16_t* lowp_base) {
  if (unit_base) {
    tessera::bind_unit(w_, layout_, unit, unit_base);
    if (lowp_.active()) {
      TESSERA_CHECK(lowp_base, "GPT::bind_unit: {} parameters bound without their working copy",
                    precision_name(lowp_.precision));
      lowp_.bind(unit_base, unit.numel(), lowp_base);
    }
  }
  if (grad_base) tessera::bind_unit(g_, layout_, unit, grad_base);
}

void GPT::init(uint64_t seed) { init_weights(layout_, config_, params_.f32(), seed); }

void GPT::refresh_working_copy(Profile* profile) {
  if (!lowp_.active() || params_.numel() == 0) return;
  kernels::Ops(*backend_, profile)
      .cast(kernels::Act(lowp_copy_.data(), lowp_.precision), params_.f32(), params_.numel());
}

ActShape GPT::act_shape(int64_t B, int64_t T) const {
  GPTConfig m = config_;
  m.seq_length = T;
  // Only real vocabulary rows are ever predicted: padding never gets logits.
  // This rank's columns are its slice's real rows (none on a slice that is
  // all padding).
  const int64_t V = std::max<int64_t>(0, std::min(layout_.vocab_end(), config_.vocab_size) -
                                             layout_.vocab_begin());
  ActShape s = act_shape_of(m, B, layout_.tp(), tp_.sp(), int64_t(layout_.layers().size()),
                            layout_.has_head(), V, recompute_, lowp_.precision);
  s.ep = ep_.size();  // the MoE layers' expert-side views (model/expert_parallel.h)
  set_layer_kinds(s, config_, layout_.layers());  // its MoE layers (GPTConfig::moe_layer)
  return s;
}

DropoutSite GPT::dropout_site(const Activations& acts, DropoutSiteKind kind, int64_t layer) const {
  DropoutSite d;
  if (!acts.dropout.training) return d;  // p = 0: inactive
  d.p = kind == DropoutSiteKind::AttentionProbs ? config_.attention_dropout : config_.hidden_dropout;
  d.seed = acts.dropout.seed;
  d.step = acts.dropout.step;
  d.layer = layer;
  d.site = kind;
  d.first_sample = acts.dropout.first_sample;
  d.head0 = tp_.rank() * acts.s.NH;  // this rank's heads are a contiguous block
  return d;
}

LayerDropout GPT::layer_dropout(const Activations& acts, size_t l) const {
  const int64_t layer = layout_.layers()[l];  // global: the same masks on every pipeline split
  LayerDropout d;
  d.probs = dropout_site(acts, DropoutSiteKind::AttentionProbs, layer);
  d.attn_out = dropout_site(acts, DropoutSiteKind::AttentionOut, layer);
  d.mlp_out = dropout_site(acts, DropoutSiteKind::MlpOut, layer);
  d.row0 = tp_.region_row0(acts.s.N());
  if (cp_.active()) d.cp = &cp_;
  return d;
}

void GPT::embed_forward(Activations& acts, const int32_t* inputs) {
  const kernels::Ops ops = this->ops(acts);
  const ActShape& s = acts.s;
  const int64_t N = s.N(), Ns = s.Ns();
  if (!tp_.active()) {
    ops.token_embedding_forward(acts.encoded, inputs, w_.wte, N, s.C, layout_.vocab_begin(),
                                layout_.vocab_end());
  } else {
    // Vocab-parallel lookup: rows of other slices are zero, the leave
    // (all-reduce, or reduce-scatter to this rank's rows) sums the slices.
    float* partial = tp_.sp() ? acts.tp_full : acts.encoded;  // (N, C)
    ops.token_embedding_forward(partial, inputs, w_.wte, N, s.C, layout_.vocab_begin(),
                                layout_.vocab_end());
    tp_leave_forward(tp_, partial, acts.encoded, N, s.C, acts.profile);
  }
  // Learned positions (rope's are applied inside attention): under cp this
  // rank's rows sit at their global positions, and under SP its block of
  // rows may start mid-sequence (or mid-chunk) and cross into the next: run
  // by run (context_parallel.h).
  if (!config_.rope()) {
    if (!cp_.active() && !tp_.active())
      ops.position_embedding_forward(acts.encoded, w_.wpe, s.B, s.T, s.C, 0);
    else
      cp_position_embedding_forward(ops, cp_, acts.encoded, w_.wpe, tp_.region_row0(N), Ns, s.T,
                                    s.C);
  }
  cp_dropout_rows(ops, cp_, acts.encoded, Ns, s.C, tp_.region_row0(N), s.T,
                  dropout_site(acts, DropoutSiteKind::Embedding, 0));
}

void GPT::layers_forward(Activations& acts, size_t first, LayerHooks* hooks) {
  for (size_t i = 0; i < acts.layers.size(); ++i) {
    const size_t l = first + i;  // the rank's layer; i is the chunk's
    if (hooks) hooks->before_forward(l);
    if (ep_.active()) {  // the layer's exchange group and scratch, for forward and backward
      acts.layers[i].ep_moe.ep = &ep_;
      acts.layers[i].ep_moe.scratch = &acts.ep_scratch;
    }
    block_forward(ops(acts), w_.layers[l], acts.layers[i], acts.layer_input(i), acts.s, tp_,
                  acts.tp_full, layer_dropout(acts, l));
    if (acts.moe_sums && w_.layers[l].moe())  // the routing's stats, for the step's metrics
      acts.moe_sums->add(l, acts.layers[i].moe.stats, kernels::kMoeStats + acts.s.E);
    if (hooks) hooks->after_forward(l);
  }
}

float GPT::head_forward(Activations& acts, const int32_t* targets) {
  const kernels::Ops ops = this->ops(acts);
  const ActShape& s = acts.s;
  const int64_t N = s.N(), Ns = s.Ns();
  Profile* prof = acts.profile;  // the tp helpers charge their communication here
  norm_forward(ops, acts.lnf, acts.lnf_mean, acts.lnf_rstd, acts.output(), w_.lnf_w, w_.lnf_b,
               Ns, s);
  // LM head (tied: wte; untied: lm_head), column-parallel over the
  // vocabulary: logits (N, V) = lnf (N, C) @ head[this rank's real rows]^T.
  const kernels::ConstAct lnf = tp_enter_forward(tp_, acts.lnf, acts.tp_full, N, s.C, prof);  // (N, C)
  if (s.V > 0) ops.matmul_forward(acts.logits, lnf, head_of(w_), nullptr, N, s.C, s.V);
  if (!tp_.active()) {
    ops.cross_entropy_forward(acts.losses, acts.ce_lse, acts.logits, targets, N, s.V);
  } else {
    for (int64_t i = 0; i < N; i++)
      TESSERA_CHECK(targets[i] < config_.vocab_size,
                    "cross_entropy: target {} at row {} is outside the vocabulary ({})",
                    targets[i], i, config_.vocab_size);
    // ce_lse holds the row max until vp_xent_finish turns it into the lse.
    ops.vp_xent_local_max(acts.ce_lse, acts.logits, N, s.V);
    tp_all_reduce(tp_, acts.ce_lse, N, comm::ReduceOp::Max, prof);
    ops.vp_xent_local_sums(acts.ce_sums, acts.logits, acts.ce_lse, targets, N, s.V,
                           layout_.vocab_begin());
    tp_all_reduce(tp_, acts.ce_sums, 2 * N, comm::ReduceOp::Sum, prof);
    ops.vp_xent_finish(acts.losses, acts.ce_lse, acts.ce_lse, acts.ce_sums, targets, N);
  }
  double sum = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < N; ++i)
    if (targets[i] >= 0) {
      sum += acts.losses[i];
      ++count;
    }
  return count ? float(sum / double(count)) : 0.0f;
}

float GPT::forward(Activations& acts, const int32_t* inputs, const int32_t* targets,
                   LayerHooks* hooks) {
  if (layout_.has_embedding()) embed_forward(acts, inputs);
  layers_forward(acts, 0, hooks);
  return layout_.has_head() ? head_forward(acts, targets) : 0.0f;
}

void GPT::head_backward(Activations& acts, const int32_t* targets, float dloss) {
  const kernels::Ops ops = this->ops(acts);
  const ActShape& s = acts.s;
  const int64_t N = s.N(), Ns = s.Ns();
  Profile* prof = acts.profile;  // the tp helpers charge their communication here
  ops.fill(acts.dresid, 0.0f, Ns * s.C, Op::Loss);
  // (N, V): in fp32 the dlogits overwrite the logits in place; under
  // --bf16 / --fp16 they are written once in the GEMM precision.
  const kernels::Act dlogits = ops.grad_operand(acts.logits, N * s.V);
  // The whole vocabulary (vocab_begin 0) or this rank's slice of it.
  ops.cross_entropy_backward(dlogits, acts.logits, acts.ce_lse, targets, dloss, N, s.V,
                             layout_.vocab_begin());
  // (N, C): re-gathered under SP, only the shard was kept
  const kernels::ConstAct lnf = tp_enter_forward(tp_, acts.lnf, acts.tp_full, N, s.C, prof);
  if (s.V > 0)
    // First into the head's gradient in a backward (tied: the embedding's
    // scatter-add into wte comes after), so the step's first backward writes it.
    ops.matmul_backward(acts.dln, head_of(g_), nullptr, dlogits, lnf, head_of(w_), N, s.C, s.V,
                        false, !acts.first_backward_of_step);
  else
    ops.fill(acts.dln, 0.0f, N * s.C, Op::Gemm);  // a slice of padding only: no gradient
  const float* dlnf = tp_enter_backward(tp_, acts.dln, N, s.C, prof);  // (Ns, C)
  // Under SP the final LayerNorm's gradients cover only this rank's rows.
  const int64_t per_norm = s.rmsnorm ? 1 : 2;  // weight (and LayerNorm's bias)
  float* glnf_w = tp_.sp() ? ln_grads_.f32() : g_.lnf_w;  // (C)
  float* glnf_b = tp_.sp() ? glnf_w + s.C : g_.lnf_b;     // (C) LayerNorm only
  if (s.rmsnorm) glnf_b = nullptr;
  if (tp_.sp()) ops.fill(glnf_w, 0.0f, per_norm * s.C, Op::LayerNorm);
  norm_backward(ops, acts.dresid, glnf_w, glnf_b, dlnf, acts.output(), w_.lnf_w, acts.lnf_mean,
                acts.lnf_rstd, Ns, s);
  if (tp_.sp()) {
    tp_sum_region_grad(tp_, glnf_w, per_norm * s.C, prof);
    ops.accumulate(g_.lnf_w, glnf_w, s.C);
    if (glnf_b) ops.accumulate(g_.lnf_b, glnf_b, s.C);
  }
}

void GPT::layers_backward(Activations& acts, size_t first, LayerHooks* hooks,
                          const LayerGradStash* stash) {
  for (size_t i = acts.layers.size(); i-- > 0;) {
    const size_t l = first + i;  // the rank's layer; i is the chunk's
    if (hooks) hooks->before_backward(l);
    // After the hook: a ZeRO-3 engine has gathered the weights recomputation needs.
    const LayerDropout drop = layer_dropout(acts, l);
    block_recompute(ops(acts), w_.layers[l], acts.layers[i], acts.layer_input(i), acts.s, tp_,
                    acts.tp_full, drop);
    if (hooks) hooks->after_recompute(l);
    block_backward(ops(acts), w_.layers[l], g_.layers[l], acts.layers[i], acts.layer_input(i),
                   acts.dresid, acts, acts.s, tp_, ln_grads_.f32(), drop,
                   stash ? &stash[i] : nullptr);
    if (hooks && !stash) hooks->after_backward(l);  // split: after its weight pass
    if (hooks && stash) hooks->after_backward_input(l);
  }
}

void GPT::embed_backward(Activations& acts, const int32_t* inputs) {
  const kernels::Ops ops = this->ops(acts);
  const ActShape& s = acts.s;
  const int64_t N = s.N(), Ns = s.Ns();
  // dresid (Ns, C) is consumed here: the embedding dropout's mask in place.
  cp_dropout_rows(ops, cp_, acts.dresid, Ns, s.C, tp_.region_row0(N), s.T,
                  dropout_site(acts, DropoutSiteKind::Embedding, 0));
  // The embedding gradient needs every row: under SP gather them first, so
  // the position table's gradient is complete (and equal) on every rank.
  const float* d = tp_leave_backward(tp_, acts.dresid, acts.dln, N, s.C, acts.profile);  // (N, C)
  ops.token_embedding_backward(g_.wte, d, inputs, N, s.C, layout_.vocab_begin(),
                               layout_.vocab_end());
  if (config_.rope()) return;
  if (cp_.active())
    cp_position_embedding_backward(ops, cp_, g_.wpe, d, s.B, s.T, s.C);
  else
    ops.position_embedding_backward(g_.wpe, d, s.B, s.T, s.C);
}

void GPT::backward(Activations& acts, const int32_t* inputs, const int32_t* targets, float dloss,
                   LayerHooks* hooks) {
  acts.moe_loss_scale = dloss * float(acts.s.N());  // the MoE losses are micro-batch means
  if (layout_.has_head()) head_backward(acts, targets, dloss);
  layers_backward(acts, 0, hooks);
  if (layout_.has_embedding()) embed_backward(acts, inputs);
}

// ---- pipeline stages ----

StageChunk GPT::stage_chunk(int64_t local_chunk, int64_t chunks) const {
  const int64_t L = int64_t(layout_.layers().size());
  TESSERA_CHECK(chunks > 0 && L % chunks == 0 && local_chunk >= 0 && local_chunk < chunks,
                "GPT::stage_chunk: chunk {} of {} over {} layers on this rank", local_chunk,
                chunks, L);
  StageChunk c;
  c.layer_count = L / chunks;
  // stage_layers() lists this rank's chunks in order, all of one size (an
  // uneven split differs between ranks, never between one rank's chunks).
  c.layer_begin = local_chunk * c.layer_count;
  // Global chunk 0 is local chunk 0 of the rank holding it; the last global
  // chunk is that rank's last local chunk (the last stage's, or under zbv's
  // V rank 0's chunk 1, beside the embedding).
  c.embeds = layout_.has_embedding() && local_chunk == 0;
  c.head = layout_.has_head() && local_chunk == chunks - 1;
  return c;
}

ActShape GPT::stage_act_shape(int64_t B, int64_t T, int64_t chunks) const {
  ActShape s = act_shape(B, T);
  s.L /= chunks;
  set_layer_kinds(s, config_, layout_.layers(), chunks);  // one arena for every chunk
  return s;
}

float GPT::forward_stage(Activations& acts, const StageChunk& c, const int32_t* inputs,
                         const int32_t* targets, LayerHooks* hooks) {
  TESSERA_CHECK(int64_t(acts.layers.size()) == c.layer_count,
                "GPT::forward_stage: activations for {} layers, chunk of {}", acts.layers.size(),
                c.layer_count);
  if (c.embeds) embed_forward(acts, inputs);
  layers_forward(acts, size_t(c.layer_begin), hooks);
  return c.head ? head_forward(acts, targets) : 0.0f;
}

void GPT::backward_stage(Activations& acts, const StageChunk& c, const int32_t* inputs,
                         const int32_t* targets, float dloss, LayerHooks* hooks) {
  backward_stage_input(acts, c, inputs, targets, dloss, nullptr, hooks);
}

void GPT::backward_stage_input(Activations& acts, const StageChunk& c, const int32_t* inputs,
                               const int32_t* targets, float dloss, const LayerGradStash* stash,
                               LayerHooks* hooks) {
  acts.moe_loss_scale = dloss * float(acts.s.N());  // the MoE losses are micro-batch means
  if (c.head) head_backward(acts, targets, dloss);
  layers_backward(acts, size_t(c.layer_begin), hooks, stash);
  if (c.embeds) embed_backward(acts, inputs);
}

void GPT::backward_stage_weight(Activations& acts, const StageChunk& c,
                                const LayerGradStash* stash, bool first, LayerHooks* hooks) {
  // Last layer first, as the input pass ran them (and the dp reductions the
  // hooks start go in the same order as under the unsplit backward).
  for (size_t i = acts.layers.size(); i-- > 0;) {
    const size_t l = size_t(c.layer_begin) + i;
    if (hooks) hooks->before_backward_weight(l);  // e.g. ZeRO-3 gathers the weights again
    // Under recomputation the GEMM inputs live in scratch the chunk's layers
    // share, so they are computed again (bit for bit, the same masks).
    block_recompute(ops(acts), w_.layers[l], acts.layers[i], acts.layer_input(i), acts.s, tp_,
                    acts.tp_full, layer_dropout(acts, l));
    block_backward_weight(ops(acts), w_.layers[l], g_.layers[l], acts.layers[i], stash[i], acts,
                          acts.s, tp_, first);
    if (hooks) hooks->after_backward(l);
  }
}

}  // namespace tessera

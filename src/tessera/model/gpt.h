// GPT: the model on one rank. Owns the flat parameter and gradient buffers
// (laid out by ParamLayout) and runs forward and backward over a micro-batch.
// Parallelism is applied from outside: the layout decides which slice and
// which layers this rank holds.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/config/gpt_config.h"
#include "tessera/core/buffer.h"
#include "tessera/kernels/backend.h"
#include "tessera/kernels/ops.h"
#include "tessera/model/activations.h"
#include "tessera/model/block.h"
#include "tessera/model/context_parallel.h"
#include "tessera/model/expert_parallel.h"
#include "tessera/model/param_layout.h"
#include "tessera/model/tensor_parallel.h"
#include "tessera/model/weights.h"

namespace tessera {

// Called around each layer of forward and backward (local layer index), so
// a parallel engine can gather a layer's parameters just before it runs
// (ZeRO-3) and reduce its gradients as soon as they are final (bucketed,
// overlapped data-parallel reduction).
class LayerHooks {
 public:
  virtual ~LayerHooks() = default;
  virtual void before_forward(size_t layer) {}
  virtual void after_forward(size_t layer) {}
  virtual void before_backward(size_t layer) {}
  // Between the layer's recomputation (--recompute-activations) and its
  // backward proper; called whether or not anything was recomputed.
  virtual void after_recompute(size_t layer) {}
  virtual void after_backward(size_t layer) {}
  // Split backward only (zb-h1, zbv: backward_stage_input / _weight): after
  // the layer's input pass (its weights are not read again until its weight
  // pass, so a ZeRO-3 engine may free them), and before its weight pass
  // (which may read them: the recompute, the GEMMs' weight operands).
  virtual void after_backward_input(size_t layer) {}
  virtual void before_backward_weight(size_t layer) {}
};

// One pipeline chunk of this rank: consecutive layers of the rank's layer
// list, plus the embedding (global chunk 0) or the final LayerNorm, tied
// head and loss (the last global chunk).
struct StageChunk {
  int64_t layer_begin = 0;  // first rank-local layer (index into layout().layers())
  int64_t layer_count = 0;
  bool embeds = false;  // input: token ids (else the activation received into acts.encoded)
  bool head = false;    // output: the loss (else acts.output(), sent to the next chunk)
};

// How a GPT is built: fixed for its life, so nothing configures it half-way
// (a precision set after activations were shaped, a backend swapped mid-run).
// The defaults are one process in fp32 on the CPU, owning its buffers.
struct GPTOptions {
  // Allocate the full flat buffers. A ZeRO engine that keeps only shards
  // passes false and binds units itself (GPT::bind_unit).
  bool own_params = true;
  bool own_grads = true;
  // The tensor-parallel group (its size must equal layout.tp()) and the
  // sequence-parallel switch; the default is no tensor parallelism.
  TensorParallel tp = {};
  // The expert-parallel group and dispatcher (model/expert_parallel.h);
  // the default is none: every MoE layer runs all its experts here. With a
  // group, the layout must hold this rank's E / ep experts (ParamLayout
  // built for its ep rank): it runs them on every ep rank's rows routed to
  // them, and their gradients are summed over the expert-data-parallel group.
  ExpertParallel ep = {};
  // GEMM precision (--bf16 / --fp16). Not fp32: the GEMMs of forward and
  // backward take a bf16 / fp16 working copy of the parameters (same flat
  // layout as params()), accumulating in fp32, and act_shape() stores the
  // GEMMs' activations in 16 bits (ActShape::precision); statistics, the
  // residual stream, the loss and every gradient stay fp32. With params()
  // allocated, the model holds the copy (working_copy()), made by
  // refresh_working_copy() from params() or written by the optimizer as it
  // updates them (DataParallel). Without (ZeRO-3) it holds none: each bound
  // unit brings its own (bind_unit).
  Precision precision = Precision::Fp32;
  // Activation recomputation (config/parallel_config.h), recorded into act_shape().
  Recompute recompute = Recompute::None;
  // The kernels forward and backward run on (kernels/backend.h); null: the
  // CPU backend. It must outlive the model.
  const kernels::Backend* backend = nullptr;
  // Context parallelism (context_parallel.h): the cp ring and this rank's
  // rows of each sequence; act_shape() is then asked for T / cp rows.
  ContextParallel cp = {};
};

class GPT {
 public:
  GPT(const GPTConfig& config, const ParamLayout& layout, const GPTOptions& options = {});

  const GPTConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  const TensorParallel& tensor_parallel() const { return tp_; }
  const ContextParallel& context_parallel() const { return cp_; }
  Buffer& params() { return params_; }  // (layout.numel())
  Buffer& grads() { return grads_; }    // (layout.numel())
  const ModelWeights& weights() const { return w_; }
  const ModelWeights& grad_views() const { return g_; }
  // Run the parameters (gradients) of `unit` from unit_base / grad_base.
  // --bf16 / --fp16 with parameters bound here (ZeRO-3): lowp_base (unit
  // numel) is the unit's working copy, gathered in 16 bits, which the GEMMs
  // read; it must outlive the binding.
  void bind_unit(const ParamUnit& unit, float* unit_base, float* grad_base,
                 const uint16_t* lowp_base = nullptr);

  void init(uint64_t seed);

  // GEMM precision (GPTOptions::precision). refresh_working_copy: profile
  // is where its casts are charged (Op::Cast; may be null).
  Precision precision() const { return lowp_.precision; }
  void refresh_working_copy(Profile* profile = nullptr);
  // The op trace (op_trace.h) runs on buffers nobody allocated: the
  // low-precision casts' scratch too, at `base` (kernels/precision.h).
  void place_lowp_scratch(uint16_t* base) { lowp_.place_scratch(base); }
  // (layout.numel()) the working copy's bits; null under fp32 or ZeRO-3.
  uint16_t* working_copy() { return lowp_copy_.empty() ? nullptr : lowp_copy_.data(); }
  int64_t working_copy_bytes() const { return int64_t(lowp_copy_.size() * sizeof(uint16_t)); }
  const kernels::Backend& backend() const { return *backend_; }
  Recompute recompute() const { return recompute_; }

  // The activation shape of a micro-batch of B sequences of T tokens on this
  // rank (tp-local widths, this rank's vocabulary columns, T / tp rows per
  // sequence in the LayerNorm regions under sequence parallelism).
  ActShape act_shape(int64_t B, int64_t T) const;

  // inputs, targets (B, T). Returns the mean loss over tokens with a target
  // >= 0; fills acts.losses (B, T).
  float forward(Activations& acts, const int32_t* inputs, const int32_t* targets,
                LayerHooks* hooks = nullptr);

  // Accumulates into grads() the gradient of (dloss * sum of token losses),
  // using the activations saved by the forward of the same micro-batch. The
  // logits buffer is overwritten.
  void backward(Activations& acts, const int32_t* inputs, const int32_t* targets, float dloss,
                LayerHooks* hooks = nullptr);

  // ---- pipeline stages: one (micro-batch, chunk) at a time ----
  // Local chunk `local_chunk` of the `chunks` (virtual stages) this rank holds.
  StageChunk stage_chunk(int64_t local_chunk, int64_t chunks) const;
  // The activation shape of one chunk: act_shape with L / chunks layers.
  // (has_head follows the rank, so one shape serves every chunk of it.)
  ActShape stage_act_shape(int64_t B, int64_t T, int64_t chunks) const;
  // Non-embedding chunks read their input (Ns, C) from acts.encoded, where
  // the caller received it. Head chunk: returns the mean loss (needs
  // targets); other chunks return 0 and leave their output in acts.output().
  float forward_stage(Activations& acts, const StageChunk& c, const int32_t* inputs,
                      const int32_t* targets, LayerHooks* hooks = nullptr);
  // Non-head chunks read dL/d output (Ns, C) from acts.dresid, where the
  // caller received it; on return acts.dresid holds dL/d input (Ns, C), to
  // send back (the embedding chunk consumes it instead). The head chunk
  // starts from dloss as backward() does. Gradients accumulate into grads().
  void backward_stage(Activations& acts, const StageChunk& c, const int32_t* inputs,
                      const int32_t* targets, float dloss, LayerHooks* hooks = nullptr);
  // The split backward of zb-h1 (parallel/schedule.h): backward_stage's
  // input pass, which leaves the layers' weight and bias gradients for later
  // and keeps their GEMMs' output gradients in stash[i] (chunk layer i, see
  // LayerGradStash in block.h), then the weight pass that computes them;
  // acts must hold the micro-batch's activations until then. The norms',
  // the head's and the embedding's gradients stay in the input pass. Hooks:
  // before_backward and after_recompute around each layer of the input
  // pass (then after_backward_input), before_backward_weight and
  // after_backward around each layer of the weight pass (its gradients are
  // then complete for the micro-batch). first: the chunk's
  // first weight pass of the step (written, not added: block_backward_weight).
  // Under recomputation the weight pass recomputes each layer again (its
  // GEMM inputs live in shared scratch), with acts.dropout's masks.
  void backward_stage_input(Activations& acts, const StageChunk& c, const int32_t* inputs,
                            const int32_t* targets, float dloss, const LayerGradStash* stash,
                            LayerHooks* hooks = nullptr);
  void backward_stage_weight(Activations& acts, const StageChunk& c, const LayerGradStash* stash,
                             bool first, LayerHooks* hooks = nullptr);

 private:
  // The pieces forward/backward and their stage forms are made of. The
  // layer loops run acts.layers (a chunk's or all), starting at rank layer `first`.
  void embed_forward(Activations& acts, const int32_t* inputs);
  void layers_forward(Activations& acts, size_t first, LayerHooks* hooks);
  float head_forward(Activations& acts, const int32_t* targets);
  void head_backward(Activations& acts, const int32_t* targets, float dloss);
  // With a stash: the input pass of a split backward (backward_stage_input).
  void layers_backward(Activations& acts, size_t first, LayerHooks* hooks,
                       const LayerGradStash* stash = nullptr);
  void embed_backward(Activations& acts, const int32_t* inputs);
  // The kernels as the pieces call them: this model's backend, charging
  // their time to the micro-batch's profile.
  kernels::Ops ops(const Activations& acts) const { return {*backend_, acts.profile, &lowp_}; }
  // The dropout sites of a micro-batch (acts.dropout): one of `kind` at
  // global layer `layer`, and those of the rank's layer l.
  DropoutSite dropout_site(const Activations& acts, DropoutSiteKind kind, int64_t layer) const;
  LayerDropout layer_dropout(const Activations& acts, size_t l) const;
  // The LM head's weight in w (or its gradient in g): the untied lm_head,
  // else the token table. By the config, not by which views are bound.
  float* head_of(const ModelWeights& w) const {
    return config_.untie_embeddings ? w.lm_head : w.wte;
  }

  GPTConfig config_;
  ParamLayout layout_;
  TensorParallel tp_;
  ContextParallel cp_;
  ExpertParallel ep_;
  Recompute recompute_;
  const kernels::Backend* backend_;  // never null; the CPU backend by default
  Buffer params_, grads_;
  Buffer ln_grads_;  // (4 * C) sequence parallelism: one micro-batch's LayerNorm grads before their tp sum
  ModelWeights w_, g_;
  kernels::LowPrecision lowp_;        // inactive: fp32
  std::vector<uint16_t> lowp_copy_;   // (layout.numel()) the working copy, bf16 / fp16 bits; empty under ZeRO-3
};

}  // namespace tessera

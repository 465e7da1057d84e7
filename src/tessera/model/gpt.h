// GPT: the model on one rank. Owns the flat parameter and gradient buffers
// (laid out by ParamLayout) and runs forward and backward over a micro-batch.
// Parallelism is applied from outside: the layout decides which slice and
// which layers this rank holds.
#pragma once
#include <cstdint>

#include "tessera/core/buffer.h"
#include "tessera/model/activations.h"
#include "tessera/model/gpt_config.h"
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
  virtual void after_backward(size_t layer) {}
};

class GPT {
 public:
  // own_params / own_grads: allocate the full flat buffers. A ZeRO engine
  // that keeps only shards passes false and binds units itself (bind_unit).
  // tp: the tensor-parallel group (its size must equal layout.tp()) and the
  // sequence-parallel switch; the default is no tensor parallelism.
  GPT(const GPTConfig& config, const ParamLayout& layout, bool own_params = true,
      bool own_grads = true, TensorParallel tp = {});

  const GPTConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  const TensorParallel& tensor_parallel() const { return tp_; }
  Buffer& params() { return params_; }  // (layout.numel())
  Buffer& grads() { return grads_; }    // (layout.numel())
  const ModelWeights& weights() const { return w_; }
  const ModelWeights& grad_views() const { return g_; }
  // Run the parameters (gradients) of `unit` from unit_base / grad_base.
  void bind_unit(const ParamUnit& unit, float* unit_base, float* grad_base);

  void init(uint64_t seed);

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

 private:
  GPTConfig config_;
  ParamLayout layout_;
  TensorParallel tp_;
  Buffer params_, grads_;
  Buffer ln_grads_;  // (4 * C) sequence parallelism: one micro-batch's LayerNorm grads before their tp sum
  ModelWeights w_, g_;
};

}  // namespace tessera

#include "tessera/model/gpt.h"

#include <algorithm>

#include "tessera/kernels/cpu/cross_entropy.h"
#include "tessera/kernels/cpu/embedding.h"
#include "tessera/kernels/cpu/layernorm.h"
#include "tessera/kernels/cpu/matmul.h"
#include "tessera/model/block.h"

namespace tessera {

GPT::GPT(const GPTConfig& config, const ParamLayout& layout, bool own_params, bool own_grads)
    : config_(config), layout_(layout) {
  if (own_params) {
    params_.allocate(layout.numel());
    w_ = bind_weights(layout_, params_.f32());
  }
  if (own_grads) {
    grads_.allocate(layout.numel());
    g_ = bind_weights(layout_, grads_.f32());
  }
  w_.layers.resize(layout.layers().size());
  g_.layers.resize(layout.layers().size());
}

void GPT::bind_unit(const ParamUnit& unit, float* unit_base, float* grad_base) {
  if (unit_base) tessera::bind_unit(w_, layout_, unit, unit_base);
  if (grad_base) tessera::bind_unit(g_, layout_, unit, grad_base);
}

void GPT::init(uint64_t seed) { init_weights(layout_, config_, params_.f32(), seed); }

ActShape GPT::act_shape(int64_t B, int64_t T) const {
  ActShape s;
  s.B = B;
  s.T = T;
  s.C = config_.hidden_size;
  s.NH = config_.num_heads / layout_.tp();
  s.Cl = s.C / layout_.tp();
  s.F = config_.ffn() / layout_.tp();
  // Only real vocabulary rows are ever predicted: padding never gets logits.
  s.V = config_.vocab_size;
  s.L = int64_t(layout_.layers().size());
  s.has_head = layout_.has_head();
  return s;
}

float GPT::forward(Activations& acts, const int32_t* inputs, const int32_t* targets,
                   LayerHooks* hooks) {
  using namespace cpu;
  const ActShape& s = acts.s;
  const int64_t N = s.B * s.T;
  Profile* prof = acts.profile;
  TIMED(prof, Op::Embedding, {
    token_embedding_forward(acts.encoded, inputs, w_.wte, N, s.C, layout_.vocab_begin(),
                            layout_.vocab_end());
    position_embedding_forward(acts.encoded, w_.wpe, s.B, s.T, s.C, 0);
  });
  for (size_t l = 0; l < w_.layers.size(); ++l) {
    if (hooks) hooks->before_forward(l);
    block_forward(w_.layers[l], acts.layers[l], acts.layer_input(l), s, prof);
    if (hooks) hooks->after_forward(l);
  }

  TIMED(prof, Op::LayerNorm,
        layernorm_forward(acts.lnf, acts.lnf_mean, acts.lnf_rstd, acts.output(), w_.lnf_w,
                          w_.lnf_b, N, s.C));
  // Tied LM head: logits (N, V) = lnf (N, C) @ wte[:V]^T.
  TIMED(prof, Op::Gemm, matmul_forward(acts.logits, acts.lnf, w_.wte, nullptr, N, s.C, s.V));
  TIMED(prof, Op::Loss,
        cross_entropy_forward(acts.losses, acts.ce_lse, acts.logits, targets, N, s.V));
  double sum = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < N; ++i)
    if (targets[i] >= 0) {
      sum += acts.losses[i];
      ++count;
    }
  return count ? float(sum / double(count)) : 0.0f;
}

void GPT::backward(Activations& acts, const int32_t* inputs, const int32_t* targets, float dloss,
                   LayerHooks* hooks) {
  using namespace cpu;
  const ActShape& s = acts.s;
  const int64_t N = s.B * s.T;
  Profile* prof = acts.profile;
  // dlogits overwrite the logits in place.
  TIMED(prof, Op::Loss,
        cross_entropy_backward(acts.logits, acts.logits, acts.ce_lse, targets, dloss, N, s.V));
  TIMED(prof, Op::Gemm,
        matmul_backward(acts.dln, g_.wte, nullptr, acts.logits, acts.lnf, w_.wte, N, s.C, s.V,
                        false));
  std::fill_n(acts.dresid, N * s.C, 0.0f);
  TIMED(prof, Op::LayerNorm,
        layernorm_backward(acts.dresid, g_.lnf_w, g_.lnf_b, acts.dln, acts.output(), w_.lnf_w,
                           acts.lnf_mean, acts.lnf_rstd, N, s.C));
  for (size_t l = w_.layers.size(); l-- > 0;) {
    if (hooks) hooks->before_backward(l);
    block_backward(w_.layers[l], g_.layers[l], acts.layers[l], acts.layer_input(l), acts.dresid,
                   acts, s, prof);
    if (hooks) hooks->after_backward(l);
  }
  TIMED(prof, Op::Embedding, {
    token_embedding_backward(g_.wte, acts.dresid, inputs, N, s.C, layout_.vocab_begin(),
                             layout_.vocab_end());
    position_embedding_backward(g_.wpe, acts.dresid, s.B, s.T, s.C);
  });
}

}  // namespace tessera

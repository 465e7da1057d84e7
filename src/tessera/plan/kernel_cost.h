// Seconds of the engine's memory-bound (non-GEMM, non-attention) kernels:
// LayerNorm, GELU, the Llama family's RMSNorm and SwiGLU, residual adds, biases, embedding, cross-entropy, AdamW,
// the gradient norm and dropout's masks. Pluggable like gemm_model.h: a system file with a
// [kernels] table (written by `tessera calibrate` from the engine's own
// kernels) gives seconds per element; otherwise the bytes each kernel moves
// per element over the device's memory bandwidth.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>

namespace tessera::plan {

struct SystemSpec;

// Per element of what each kernel is applied to (see kernel_unit below).
enum class Kernel {
  LayerNormForward, LayerNormBackward,  // per (row, feature) of the normalised activation
  GeluForward, GeluBackward,            // per MLP activation
  Residual,                             // one add: per output element
  BiasAdd, BiasGrad,                    // per output element of the linear / of dY
  EmbeddingForward, EmbeddingBackward,  // token + position, per (token, feature)
  CrossEntropyForward, CrossEntropyBackward,  // per logit
  AdamW,                                // per parameter this rank updates
  GradNorm,                             // per gradient element this rank reads
  RMSNormForward, RMSNormBackward,      // per (row, feature), as LayerNorm's
  SwigluForward, SwigluBackward,        // per output element (N F; the input is 2 N F)
  // A hidden dropout (dropout_rows), drawn from Philox and applied in place:
  // per element. Counter-based generation is arithmetic, ~10x the cost of
  // moving the element on a CPU, so bytes over bandwidth undercount it.
  Dropout,
  // The attention-probability mask inside the flash kernel: per Philox draw
  // (kernels/cpu/attention.h: attention_dropout_draws), forward or backward.
  AttentionDropout,
  kCount
};
constexpr size_t kKernelCount = size_t(Kernel::kCount);

// The name in a system file's [kernels] table ("layernorm_forward", ...).
constexpr std::string_view kernel_name(Kernel k) {
  constexpr std::array<std::string_view, kKernelCount> names = {
      "layernorm_forward", "layernorm_backward", "gelu_forward",        "gelu_backward",
      "residual",          "bias_add",           "bias_grad",           "embedding_forward",
      "embedding_backward", "cross_entropy_forward", "cross_entropy_backward", "adamw",
      "grad_norm",         "rmsnorm_forward",    "rmsnorm_backward",    "swiglu_forward",
      "swiglu_backward",   "dropout",            "attention_dropout"};
  return names[size_t(k)];
}

// Bytes moved per element when nothing is measured, for activations of
// `element_bytes` (2 mixed precision, 4 fp32). The optimizer and the norm
// are fp32 either way.
double kernel_bytes_per_element(Kernel k, double element_bytes);

// Seconds for `elements` elements on one device of `sys`.
double kernel_seconds(const SystemSpec& sys, Kernel k, double elements, double element_bytes);

}  // namespace tessera::plan

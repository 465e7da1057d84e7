// Clipping by global gradient norm, with PyTorch's clip_grad_norm_ semantics.
#pragma once

namespace tessera {

// Factor to multiply gradients by: min(1, max_norm / (norm + 1e-6)); 1 when
// max_norm <= 0 (clipping off).
inline float clip_scale(double norm, float max_norm) {
  if (max_norm <= 0) return 1.0f;
  double c = double(max_norm) / (norm + 1e-6);
  return c < 1.0 ? float(c) : 1.0f;
}

}  // namespace tessera

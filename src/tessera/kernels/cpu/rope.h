// Rotary position embedding (RoPE) in HF Llama's "rotate_half" convention on
// the stored head layout: within a head of HS, dims i and i + HS/2 form a
// pair rotated by angle pos * base^(-2i/HS), i < HS/2:
//   y_i = x_i cos - x_{i+HS/2} sin,   y_{i+HS/2} = x_{i+HS/2} cos + x_i sin.
// Attention applies it to q and k as it loads them (attention.cpp); the
// gradient goes back through the transpose (the inverse rotation).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace tessera::cpu {

// cos (HS/2) and sin (HS/2) of position pos. The angles are formed in
// double and rounded once, so a table row and a decode step's row agree.
void rope_angles(float* cos, float* sin, int64_t pos, int64_t HS, float base);

// The angles of positions 0..T-1: cos, sin (T, HS/2).
struct RopeTable {
  int64_t T = 0, half = 0;
  float base = 0.0f;
  std::vector<float> cos, sin;  // (T, half) each
  const float* cos_row(int64_t t) const { return cos.data() + t * half; }
  const float* sin_row(int64_t t) const { return sin.data() + t * half; }
};

// The table for (T, HS, base), built once and kept (a few entries: a run
// uses one or two shapes), so an attention call pays no trigonometry.
// Thread-safe; the table stays valid while the pointer is held.
std::shared_ptr<const RopeTable> rope_table(int64_t T, int64_t HS, float base);

// x (rows, stride): the first heads * HS columns of row r, heads of HS,
// rotated in place to position pos0 + r: keys entering a KV cache, so a
// decoding step reads them rotated as the training kernels' tiles hold them.
void rope_rows(float* x, int64_t rows, int64_t stride, int64_t heads, int64_t HS, int64_t pos0,
               float base);

// x (2 half) rotated in place by the angles c, s (half).
inline void rope_rotate(float* x, const float* c, const float* s, int64_t half) {
  float* x2 = x + half;
#pragma omp simd
  for (int64_t i = 0; i < half; i++) {
    const float a = x[i], b = x2[i];
    x[i] = a * c[i] - b * s[i];
    x2[i] = b * c[i] + a * s[i];
  }
}

// The transpose (inverse rotation): a gradient of rotated values back to
// the stored ones.
inline void rope_unrotate(float* x, const float* c, const float* s, int64_t half) {
  float* x2 = x + half;
#pragma omp simd
  for (int64_t i = 0; i < half; i++) {
    const float a = x[i], b = x2[i];
    x[i] = a * c[i] + b * s[i];
    x2[i] = b * c[i] - a * s[i];
  }
}

}  // namespace tessera::cpu

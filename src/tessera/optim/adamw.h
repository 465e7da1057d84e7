// AdamW over a range of a flat parameter buffer. Weight decay follows the
// layout: matrices and embeddings decay, biases and LayerNorm do not. The
// range is the whole buffer on one rank, or a rank's shard under ZeRO; the
// moments are allocated for the range only.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/core/buffer.h"
#include "tessera/model/param_layout.h"

namespace tessera {

struct AdamWConfig {
  float lr = 6e-4f;          // --lr (peak)
  float min_lr = 6e-5f;      // --min-lr
  float beta1 = 0.9f;        // --adam-beta1
  float beta2 = 0.95f;       // --adam-beta2
  float eps = 1e-8f;         // --adam-eps
  float weight_decay = 0.1f; // --weight-decay
  float clip_grad = 1.0f;    // --clip-grad (0: no clipping)
  int64_t warmup_iters = 0;  // --lr-warmup-iters
  int64_t decay_iters = 0;   // --lr-decay-iters (0: train-iters)
};

class AdamW {
 public:
  // Optimises elements [begin, end) of buffers laid out by `layout`.
  AdamW(const ParamLayout& layout, int64_t begin, int64_t end, const AdamWConfig& cfg);

  // params, grads: (end - begin) elements of this rank's range. grads are
  // multiplied by grad_scale, used, and left zeroed. step is 1-based.
  void step(float* params, float* grads, float lr, float grad_scale, int64_t step);

  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }
  Buffer& exp_avg() { return m_; }     // (end - begin)
  Buffer& exp_avg_sq() { return v_; }  // (end - begin)
  int64_t state_bytes() const { return int64_t(m_.nbytes() + v_.nbytes()); }

 private:
  struct Run {  // a maximal run of elements with one weight-decay setting
    int64_t begin, end;
    bool decay;
  };
  int64_t begin_, end_;
  AdamWConfig cfg_;
  std::vector<Run> runs_;
  Buffer m_, v_;
};

}  // namespace tessera

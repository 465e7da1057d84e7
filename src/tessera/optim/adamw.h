// AdamW over the part of a flat parameter buffer this rank updates. Weight
// decay follows the layout: matrices and embeddings decay, biases and
// LayerNorm do not.
//
// The part is a list of segments of the flat buffer (one segment [0, numel)
// on one rank; under ZeRO, the rank's slice of every unit). The moments are
// stored compactly for the segments only ("shard" order: segment after
// segment at their shard offsets), so ZeRO divides them by dp.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/core/buffer.h"
#include "tessera/kernels/ops.h"
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

// Elements [global_begin, global_end) of the flat buffer, stored from
// shard_offset in the rank's compact (sharded) buffers.
struct FlatSegment {
  int64_t global_begin = 0, global_end = 0;
  int64_t shard_offset = 0;
  int64_t size() const { return global_end - global_begin; }
};

// How a buffer passed to AdamW::step is indexed: by flat-buffer offset (a
// full buffer) or by shard offset (a compact shard).
enum class Indexing { Global, Shard };

class AdamW {
 public:
  // shard_numel: size of the compact moment buffers (>= every segment's end
  // shard offset).
  AdamW(const ParamLayout& layout, std::vector<FlatSegment> segments, int64_t shard_numel,
        const AdamWConfig& cfg);
  // The whole buffer on one rank.
  AdamW(const ParamLayout& layout, const AdamWConfig& cfg);

  // grads are multiplied by grad_scale, used, and left zeroed (the segments'
  // elements only). step is 1-based. The updates run on ops's backend,
  // charged to Op::Optimizer.
  // working (--bf16 / --fp16): null, or a bf16 / fp16 view of the working
  // copy of params, indexed like params, that the same pass writes each
  // updated element's 16-bit value into.
  void step(const kernels::Ops& ops, float* params, Indexing params_at, float* grads,
            Indexing grads_at, float lr, float grad_scale, int64_t step,
            kernels::Act working = {});

  const std::vector<FlatSegment>& segments() const { return segments_; }
  Buffer& exp_avg() { return m_; }     // (shard_numel)
  Buffer& exp_avg_sq() { return v_; }  // (shard_numel)
  int64_t state_bytes() const { return int64_t(m_.nbytes() + v_.nbytes()); }

 private:
  struct Run {  // a maximal stretch of one segment with one weight-decay setting
    int64_t global_begin, size, shard_offset;
    bool decay;
  };
  AdamWConfig cfg_;
  std::vector<FlatSegment> segments_;
  std::vector<Run> runs_;
  Buffer m_, v_;
};

}  // namespace tessera

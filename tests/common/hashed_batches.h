// Token windows from a counter-based hash: sample i of a split is a
// pseudo-random window determined by (split, i) alone, so any layout, any
// resume point and any number of runs read the same samples without a
// file or a sampler's state (the checkpoint and fine-tune tests).
#pragma once
#include <cstdint>
#include <string>

#include "tessera/core/rng.h"
#include "tessera/train/batch_source.h"

namespace tessera::test {

class HashedBatches : public BatchSource {
 public:
  explicit HashedBatches(int64_t vocab) : vocab_(vocab) {}
  // out (count, T + 1)
  void fill(Split split, int64_t first, int64_t count, int64_t T, int32_t* out) const override {
    for (int64_t i = 0; i < count * (T + 1); ++i) {
      uint64_t sample = uint64_t(first + i / (T + 1)), pos = uint64_t(i % (T + 1));
      out[i] = int32_t(rng_u64(split == Split::Train ? 1 : 2, sample, pos) % uint64_t(vocab_));
    }
  }
  int64_t vocab_size() const override { return vocab_; }
  std::string describe() const override { return "hashed"; }

 private:
  int64_t vocab_;
};

}  // namespace tessera::test

// SampledBatches: the trainer's BatchSource over a TokenSource. The tokens
// are split into a training and a held-out validation range; training
// sample i is window i of the shuffled epoch order (WindowSampler), so it
// depends on (seed, i) only; validation reads windows in order.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "tessera/data/token_source.h"
#include "tessera/data/window_sampler.h"
#include "tessera/train/batch_source.h"

namespace tessera {

class SampledBatches : public BatchSource {
 public:
  // Throws (naming the data) if either split cannot hold one window of T + 1.
  // test_fraction: a last part held out from both (Megatron's --split third share).
  SampledBatches(std::unique_ptr<data::TokenSource> src, int64_t vocab_size, int64_t T,
                 uint64_t seed, double valid_fraction, double test_fraction = 0);

  void fill(Split split, int64_t first, int64_t count, int64_t T, int32_t* out) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  std::string describe() const override;
  const data::TokenSource& source() const { return *src_; }
  // Windows one pass over each split visits.
  int64_t windows(Split split) const override {
    return (split == Split::Train ? train_ : valid_).windows_per_epoch();
  }

 private:
  std::unique_ptr<data::TokenSource> src_;
  int64_t vocab_size_;
  data::DataSplit split_;
  data::WindowSampler train_, valid_;
};

// An in-memory token sequence as a TokenSource (tests, small corpora).
std::unique_ptr<data::TokenSource> memory_token_source(std::vector<int32_t> tokens,
                                                       std::string name);

}  // namespace tessera

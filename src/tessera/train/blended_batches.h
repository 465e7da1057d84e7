// BatchSources built from others, for the data layouts Megatron-LM users
// expect: a weighted blend of datasets (`--data-path 0.7 a 0.3 b`) and a
// separate validation set (`--valid-data-path`).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/train/batch_source.h"

namespace tessera {

// Sample i of a split comes from part d(i), as that part's sample j(i):
// d(i) is the part furthest behind its share (weights[d] * (i + 1) minus the
// samples it has given so far; ties to the lower index), j(i) counts that
// part's samples. So after any n samples each part has given its share to
// within one sample, and the sequence depends on the weights alone: the same
// on every rank and layout (Megatron-LM's blending rule; its index arrays
// are built here lazily, as far as a batch asks). Validation blends the
// parts' validation samples the same way.
class BlendedBatches final : public BatchSource {
 public:
  // weights: (parts,), > 0, summing to 1. Throws if the parts' vocabularies differ.
  BlendedBatches(std::vector<std::unique_ptr<BatchSource>> parts, std::vector<double> weights);
  void fill(Split split, int64_t first, int64_t count, int64_t T, int32_t* out) const override;
  int64_t vocab_size() const override { return parts_.front()->vocab_size(); }
  std::string describe() const override;
  // (part, its sample) that sample `i` of `split` reads.
  std::pair<int, int64_t> pick(Split split, int64_t i) const;

 private:
  struct Index {
    std::vector<uint8_t> part;     // (samples built,) d(i)
    std::vector<int64_t> sample;   // (samples built,) j(i)
    std::vector<int64_t> given;    // (parts,) samples each part has given so far
  };
  void extend(Index& x, int64_t n) const;
  std::vector<std::unique_ptr<BatchSource>> parts_;
  std::vector<double> weights_;  // (parts,)
  mutable std::mutex mutex_;     // fill() may run on several threads
  mutable Index index_[2];       // by Split
};

// Training windows from one source and validation windows from another.
class TrainValidBatches final : public BatchSource {
 public:
  // Throws if the vocabularies differ.
  TrainValidBatches(std::unique_ptr<BatchSource> train, std::unique_ptr<BatchSource> valid);
  void fill(Split split, int64_t first, int64_t count, int64_t T, int32_t* out) const override;
  int64_t vocab_size() const override { return train_->vocab_size(); }
  std::string describe() const override;
  int64_t windows(Split split) const override {
    return split == Split::Train ? train_->windows(split) : valid_->windows(Split::Valid);
  }

 private:
  std::unique_ptr<BatchSource> train_, valid_;
};

}  // namespace tessera

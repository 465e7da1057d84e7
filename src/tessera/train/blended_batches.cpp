#include "tessera/train/blended_batches.h"

#include <fmt/format.h>

#include "tessera/core/error.h"

namespace tessera {

BlendedBatches::BlendedBatches(std::vector<std::unique_ptr<BatchSource>> parts,
                               std::vector<double> weights)
    : parts_(std::move(parts)), weights_(std::move(weights)) {
  TESSERA_CHECK(!parts_.empty() && parts_.size() == weights_.size() && parts_.size() <= 255,
                "a blend needs 1 to 255 parts, one weight each (got {} parts, {} weights)",
                parts_.size(), weights_.size());
  for (const auto& p : parts_)
    TESSERA_CHECK(p->vocab_size() == parts_.front()->vocab_size(),
                  "--data-path: blended datasets disagree on the vocabulary ({}: {}, {}: {})",
                  parts_.front()->describe(), parts_.front()->vocab_size(), p->describe(),
                  p->vocab_size());
  for (Index& x : index_) x.given.assign(parts_.size(), 0);
}

void BlendedBatches::extend(Index& x, int64_t n) const {
  for (int64_t i = int64_t(x.part.size()); i < n; ++i) {
    size_t best = 0;
    double best_lag = -1e300;
    for (size_t d = 0; d < parts_.size(); ++d) {
      const double lag = weights_[d] * double(i + 1) - double(x.given[d]);
      if (lag > best_lag) best = d, best_lag = lag;
    }
    x.part.push_back(uint8_t(best));
    x.sample.push_back(x.given[best]++);
  }
}

std::pair<int, int64_t> BlendedBatches::pick(Split split, int64_t i) const {
  std::lock_guard<std::mutex> lock(mutex_);
  Index& x = index_[split == Split::Train ? 0 : 1];
  extend(x, i + 1);
  return {x.part[size_t(i)], x.sample[size_t(i)]};
}

void BlendedBatches::fill(Split split, int64_t first, int64_t count, int64_t T,
                          int32_t* out) const {
  for (int64_t i = 0; i < count; ++i) {
    const auto [part, sample] = pick(split, first + i);
    parts_[size_t(part)]->fill(split, sample, 1, T, out + i * (T + 1));
  }
}

std::string BlendedBatches::describe() const {
  std::string s = fmt::format("blend of {}:", parts_.size());
  for (size_t d = 0; d < parts_.size(); ++d)
    s += fmt::format("{} {:.3f} x [{}]", d ? ";" : "", weights_[d], parts_[d]->describe());
  return s;
}

TrainValidBatches::TrainValidBatches(std::unique_ptr<BatchSource> train,
                                     std::unique_ptr<BatchSource> valid)
    : train_(std::move(train)), valid_(std::move(valid)) {
  TESSERA_CHECK(train_->vocab_size() == valid_->vocab_size(),
                "--valid-data-path: its vocabulary ({}) differs from the training data's ({})",
                valid_->vocab_size(), train_->vocab_size());
}

void TrainValidBatches::fill(Split split, int64_t first, int64_t count, int64_t T,
                             int32_t* out) const {
  (split == Split::Train ? train_ : valid_)->fill(split, first, count, T, out);
}

std::string TrainValidBatches::describe() const {
  return fmt::format("training: {} | validation: {}", train_->describe(), valid_->describe());
}

}  // namespace tessera

#include "tessera/train/sampled_batches.h"

#include <algorithm>

#include <fmt/format.h>

#include "tessera/core/error.h"

namespace tessera {

namespace {

class MemoryTokenSource final : public data::TokenSource {
 public:
  MemoryTokenSource(std::vector<int32_t> tokens, std::string name)
      : TokenSource(std::move(name), int64_t(tokens.size())), tokens_(std::move(tokens)) {}
  std::string describe() const override {
    return fmt::format("{}: {} tokens in memory", path(), tokens_.size());
  }

 private:
  void read_raw(int64_t begin, int64_t count, int32_t* out) const override {
    std::copy_n(tokens_.begin() + begin, count, out);
  }
  std::vector<int32_t> tokens_;
};

data::DataSplit checked_split(const data::TokenSource& src, double valid_fraction,
                              double test_fraction, int64_t T) {
  // One window each for training, validation and test.
  const int64_t windows = 1 + (valid_fraction > 0) + (test_fraction > 0);
  TESSERA_CHECK(src.size() >= windows * (T + 1),
                "{}: {} tokens are fewer than {} window(s) of --seq-length + 1 ({} tokens)",
                src.path(), src.size(), windows, T + 1);
  return data::split_train_val(src.size(), valid_fraction, T + 1, test_fraction);
}

}  // namespace

std::unique_ptr<data::TokenSource> memory_token_source(std::vector<int32_t> tokens,
                                                       std::string name) {
  return std::make_unique<MemoryTokenSource>(std::move(tokens), std::move(name));
}

SampledBatches::SampledBatches(std::unique_ptr<data::TokenSource> src, int64_t vocab_size,
                               int64_t T, uint64_t seed, double valid_fraction,
                               double test_fraction)
    : src_(std::move(src)),
      vocab_size_(vocab_size),
      split_(checked_split(*src_, valid_fraction, test_fraction, T)),
      train_(split_.train, T, seed, /*shuffle=*/true),
      valid_(split_.val.size() > T ? split_.val : split_.train, T, seed, /*shuffle=*/false) {
  src_->set_vocab_limit(uint32_t(vocab_size));
}

void SampledBatches::fill(Split split, int64_t first, int64_t count, int64_t T, int32_t* out) const {
  const data::WindowSampler& s = split == Split::Train ? train_ : valid_;
  TESSERA_CHECK(T == s.T(), "batch of seq {} asked from data windowed for seq {}", T, s.T());
  for (int64_t i = 0; i < count; ++i) {
    // Validation cycles over its windows; training runs over epochs.
    int64_t sample = split == Split::Train ? first + i : (first + i) % s.windows_per_epoch();
    s.read(*src_, sample, out + i * (T + 1));
  }
}

std::string SampledBatches::describe() const {
  const std::string test =
      split_.test.size() > 0 ? fmt::format(" + {} test (held out)", split_.test.size()) : "";
  return fmt::format("{} | {} training + {} validation{} tokens, vocabulary {}", src_->describe(),
                     split_.train.size(), split_.val.size(), test, vocab_size_);
}

}  // namespace tessera

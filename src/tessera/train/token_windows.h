// TokenWindows: a BatchSource over an in-memory token sequence. The last
// `valid_fraction` of the tokens are held out for validation; sample i of a
// split starts at a position drawn from (seed, split, i).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/train/batch_source.h"

namespace tessera {

class TokenWindows : public BatchSource {
 public:
  TokenWindows(std::vector<int32_t> tokens, int64_t vocab_size, uint64_t seed,
               double valid_fraction, std::string name);

  void fill(Split split, int64_t first, int64_t count, int64_t T, int32_t* out) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  std::string describe() const override;
  int64_t train_tokens() const { return split_; }
  int64_t valid_tokens() const { return int64_t(tokens_.size()) - split_; }

 private:
  std::vector<int32_t> tokens_;
  int64_t vocab_size_;
  uint64_t seed_;
  int64_t split_;  // tokens [0, split_) train, [split_, end) validation
  std::string name_;
};

}  // namespace tessera

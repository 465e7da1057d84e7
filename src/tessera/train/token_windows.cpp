#include "tessera/train/token_windows.h"

#include <algorithm>

#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/core/rng.h"

namespace tessera {

TokenWindows::TokenWindows(std::vector<int32_t> tokens, int64_t vocab_size, uint64_t seed,
                           double valid_fraction, std::string name)
    : tokens_(std::move(tokens)), vocab_size_(vocab_size), seed_(seed), name_(std::move(name)) {
  split_ = int64_t(double(tokens_.size()) * (1.0 - valid_fraction));
  for (int32_t t : tokens_)
    TESSERA_CHECK(t >= 0 && t < vocab_size_, "{}: token id {} is outside the vocabulary ({})",
                  name_, t, vocab_size_);
}

void TokenWindows::fill(Split split, int64_t first, int64_t count, int64_t T, int32_t* out) const {
  const int64_t lo = split == Split::Train ? 0 : split_;
  const int64_t hi = split == Split::Train ? split_ : int64_t(tokens_.size());
  TESSERA_CHECK(hi - lo >= T + 1, "{}: the {} split has {} tokens, fewer than --seq-length + 1 ({})",
                name_, split == Split::Train ? "training" : "validation", hi - lo, T + 1);
  const uint64_t stream = split == Split::Train ? 0 : 1;
  for (int64_t i = 0; i < count; ++i) {
    int64_t start = lo + int64_t(rng_u64(seed_, stream, uint64_t(first + i)) %
                                 uint64_t(hi - lo - T));
    std::copy_n(tokens_.begin() + start, T + 1, out + i * (T + 1));
  }
}

std::string TokenWindows::describe() const {
  return fmt::format("{}: {} training + {} validation tokens, vocabulary {}", name_, split_,
                     int64_t(tokens_.size()) - split_, vocab_size_);
}

}  // namespace tessera

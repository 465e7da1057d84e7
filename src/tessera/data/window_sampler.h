// Deterministic training windows. A window is T+1 consecutive tokens (inputs
// and their next-token targets). Sample s of the run is a pure function of
// (seed, s): epoch = s / windows_per_epoch, and within an epoch the windows
// are visited in a keyed pseudo-random order (a Feistel bijection on the
// window indices, so no permutation is stored). Any rank can compute any
// sample, so the global batch of a step is the same whatever the parallel
// layout: step k's batch is samples [k*B, (k+1)*B), split among data-parallel
// ranks however they like.
#pragma once
#include <cstdint>

#include "tessera/data/token_source.h"

namespace tessera::data {

struct TokenRange {
  int64_t begin = 0, end = 0;  // [begin, end) token offsets
  int64_t size() const { return end - begin; }
};

struct DataSplit {
  TokenRange train, val, test;  // in this order along the file; test is never trained on
};

// Holds out the last test_fraction of the tokens as a test part and the
// val_fraction before it for validation (each at least one window of
// `window` tokens when its fraction is > 0). Throws if a part is too short
// for one window.
DataSplit split_train_val(int64_t n_tokens, double val_fraction, int64_t window,
                          double test_fraction = 0);

// A bijection on [0, n) keyed by `key`: a balanced Feistel network on the
// next even number of bits, cycle-walking back into range.
uint64_t permute_index(uint64_t i, uint64_t n, uint64_t key);

class WindowSampler {
 public:
  // Windows of T+1 tokens inside range, starting on a stride of T. With
  // shuffle, each epoch visits them in its own order and shifts their grid
  // by a per-epoch offset in [0, T) (so epochs see different cuts; costs one
  // window per epoch); without, sample i is window i (for validation).
  WindowSampler(TokenRange range, int64_t T, uint64_t seed, bool shuffle = true);

  int64_t windows_per_epoch() const { return n_windows_; }
  int64_t T() const { return T_; }
  // Token offset of sample `sample` (counted over all epochs).
  int64_t start(int64_t sample) const;
  int64_t start(int64_t epoch, int64_t index) const;
  // Reads sample `sample` into out (T+1,).
  void read(const TokenSource& src, int64_t sample, int32_t* out) const;

 private:
  TokenRange range_;
  int64_t T_;
  uint64_t seed_;
  bool shuffle_;
  int64_t n_windows_;
};

}  // namespace tessera::data

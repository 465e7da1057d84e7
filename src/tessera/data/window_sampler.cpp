#include "tessera/data/window_sampler.h"

#include <algorithm>
#include <cmath>

#include "tessera/core/error.h"
#include "tessera/core/rng.h"

namespace tessera::data {

namespace {
// rng streams of the sampler, distinct from other users of the seed
constexpr uint64_t kStreamEpochKey = 0x73616d706c657231ull;  // "sampler1"
constexpr uint64_t kStreamShift = 0x73616d706c657232ull;     // "sampler2"
}  // namespace

DataSplit split_train_val(int64_t n_tokens, double val_fraction, int64_t window,
                          double test_fraction) {
  TESSERA_CHECK(val_fraction >= 0.0 && val_fraction < 1.0, "validation fraction must be in [0, 1), got {}", val_fraction);
  TESSERA_CHECK(test_fraction >= 0.0 && val_fraction + test_fraction < 1.0,
                "validation + test fractions must be in [0, 1), got {} + {}", val_fraction,
                test_fraction);
  auto held_out = [&](double fraction) {
    return fraction > 0.0 ? std::max<int64_t>(window, int64_t(std::floor(double(n_tokens) * fraction)))
                          : int64_t(0);
  };
  const int64_t n_val = held_out(val_fraction), n_test = held_out(test_fraction);
  DataSplit s;
  s.train = {0, n_tokens - n_val - n_test};
  s.val = {s.train.end, s.train.end + n_val};
  s.test = {s.val.end, n_tokens};
  TESSERA_CHECK(s.train.size() >= window,
                "not enough tokens: {} tokens leave {} for training after holding out {} for validation and {} for test; one window needs {}",
                n_tokens, s.train.size(), n_val, n_test, window);
  return s;
}

uint64_t permute_index(uint64_t i, uint64_t n, uint64_t key) {
  if (n <= 1) return 0;
  int bits = 64 - __builtin_clzll(n - 1);  // smallest with 2^bits >= n
  bits += bits & 1;                          // even, for balanced halves
  if (bits < 2) bits = 2;
  const int half = bits / 2;
  const uint64_t mask = (uint64_t(1) << half) - 1;
  // 2^bits < 4n, so cycle-walking takes under 4 rounds on average.
  do {
    uint64_t L = i >> half, R = i & mask;
    for (uint64_t round = 0; round < 6; ++round) {
      uint64_t F = rng_u64(key, round, R) & mask;
      uint64_t next = L ^ F;
      L = R;
      R = next;
    }
    i = (L << half) | R;
  } while (i >= n);
  return i;
}

WindowSampler::WindowSampler(TokenRange range, int64_t T, uint64_t seed, bool shuffle)
    : range_(range), T_(T), seed_(seed), shuffle_(shuffle) {
  TESSERA_CHECK(T >= 1, "sequence length must be positive, got {}", T);
  const int64_t len = range.size();
  TESSERA_CHECK(len >= T + 1, "not enough tokens: {} tokens cannot hold one window of {} (sequence length {} + 1)", len, T + 1, T);
  // Window k covers [shift + k*T, shift + k*T + T + 1) with shift <= T-1 when
  // shuffling; keep the count the same for every shift.
  n_windows_ = (shuffle_ && len >= 2 * T + 1) ? (len - T) / T : (len - 1) / T;
  if (n_windows_ < 1) n_windows_ = 1;
}

int64_t WindowSampler::start(int64_t epoch, int64_t index) const {
  TESSERA_CHECK(epoch >= 0 && index >= 0 && index < n_windows_, "sample index {} of epoch {} is outside [0, {})", index, epoch,
                n_windows_);
  if (!shuffle_) return range_.begin + index * T_;
  const uint64_t key = rng_u64(seed_, kStreamEpochKey, uint64_t(epoch));
  const int64_t k = int64_t(permute_index(uint64_t(index), uint64_t(n_windows_), key));
  const int64_t spare = range_.size() - (n_windows_ * T_ + 1);  // room left for a shift
  const int64_t shift = std::min<int64_t>(spare, T_ - 1) > 0
                            ? int64_t(rng_u64(seed_, kStreamShift, uint64_t(epoch)) % uint64_t(std::min<int64_t>(spare, T_ - 1) + 1))
                            : 0;
  return range_.begin + shift + k * T_;
}

int64_t WindowSampler::start(int64_t sample) const {
  TESSERA_CHECK(sample >= 0, "negative sample index {}", sample);
  return start(sample / n_windows_, sample % n_windows_);
}

void WindowSampler::read(const TokenSource& src, int64_t sample, int32_t* out) const {
  src.read(start(sample), T_ + 1, out);
}

}  // namespace tessera::data

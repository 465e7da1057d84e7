// Deterministic windows: a pure function of (seed, epoch, index).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "tessera/core/error.h"
#include "tessera/data/window_sampler.h"

using namespace tessera::data;

TEST(WindowSampler, PermutationIsABijection) {
  for (uint64_t n : {1ull, 2ull, 3ull, 5ull, 17ull, 1000ull, 4097ull}) {
    for (uint64_t key : {0ull, 99ull}) {
      std::vector<int> hit(n, 0);
      for (uint64_t i = 0; i < n; ++i) {
        uint64_t j = permute_index(i, n, key);
        ASSERT_LT(j, n);
        ++hit[j];
      }
      EXPECT_TRUE(std::all_of(hit.begin(), hit.end(), [](int h) { return h == 1; })) << "n=" << n;
    }
  }
  // and it actually shuffles: a 1000-element permutation has few fixed points
  int fixed = 0;
  for (uint64_t i = 0; i < 1000; ++i) fixed += permute_index(i, 1000, 7) == i;
  EXPECT_LT(fixed, 10);
}

TEST(WindowSampler, SameSeedEpochIndexGivesSameWindow) {
  TokenRange r{0, 100000};
  WindowSampler a(r, 64, 1234), b(r, 64, 1234), c(r, 64, 1235);
  int differ = 0;
  for (int64_t s = 0; s < 5000; s += 37) {
    EXPECT_EQ(a.start(s), b.start(s));
    differ += a.start(s) != c.start(s);
  }
  EXPECT_GT(differ, 100);
  // Golden values: a change here changes every run's data order.
  EXPECT_EQ(a.windows_per_epoch(), 1561);
  std::vector<int64_t> first;
  for (int64_t s = 0; s < 4; ++s) first.push_back(a.start(s));
  EXPECT_EQ(first, (std::vector<int64_t>{72440, 50552, 72952, 20600}));
}

TEST(WindowSampler, AnEpochVisitsEveryWindowOnceInsideTheRange) {
  const int64_t T = 16;
  TokenRange r{1000, 1000 + 16 * 50 + 7};
  WindowSampler w(r, T, 42);
  const int64_t n = w.windows_per_epoch();
  EXPECT_EQ(n, (r.size() - T) / T);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<int64_t> starts;
    for (int64_t i = 0; i < n; ++i) {
      int64_t s = w.start(epoch, i);
      EXPECT_GE(s, r.begin);
      EXPECT_LE(s + T + 1, r.end);
      starts.insert(s);
    }
    EXPECT_EQ(int64_t(starts.size()), n);
    // one grid per epoch: all starts share the epoch's shift
    int64_t shift = (*starts.begin() - r.begin) % T;
    for (int64_t s : starts) EXPECT_EQ((s - r.begin) % T, shift);
  }
  // epochs use different orders
  int same = 0;
  for (int64_t i = 0; i < n; ++i) same += w.start(0, i) == w.start(1, i);
  EXPECT_LT(same, n / 2);
  // sample = epoch * n + index
  EXPECT_EQ(w.start(2 * n + 5), w.start(2, 5));
}

TEST(WindowSampler, UnshuffledIsSequential) {
  WindowSampler w(TokenRange{900, 1000}, 10, 1, /*shuffle=*/false);
  EXPECT_EQ(w.windows_per_epoch(), 9);  // (100 - 1) / 10
  EXPECT_EQ(w.start(0), 900);
  EXPECT_EQ(w.start(8), 980);
  EXPECT_EQ(w.start(9), 900);  // next epoch, same order
}

TEST(WindowSampler, TrainValSplit) {
  DataSplit s = split_train_val(1000, 0.1, 17);
  EXPECT_EQ(s.train.begin, 0);
  EXPECT_EQ(s.train.end, 900);
  EXPECT_EQ(s.val.begin, 900);
  EXPECT_EQ(s.val.end, 1000);
  DataSplit tiny = split_train_val(1000, 0.001, 65);  // at least one window held out
  EXPECT_EQ(tiny.val.size(), 65);
  EXPECT_EQ(split_train_val(1000, 0.0, 65).val.size(), 0);
  EXPECT_THROW(split_train_val(100, 0.5, 65), tessera::Error);
  EXPECT_THROW(WindowSampler(TokenRange{0, 10}, 10, 1), tessera::Error);
}

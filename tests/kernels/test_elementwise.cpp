// Elementwise helpers and reductions.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernel_test_util.h"
#include "tessera/kernels/cpu/elementwise.h"

using namespace tessera;

namespace {

// Sizes below and above the threading threshold, not multiples of 16.
constexpr int64_t kSizes[] = {1, 17, 100003};

TEST(Elementwise, AddAccumulateScale) {
  for (int64_t n : kSizes) {
    const auto a = test::randn(n, 1), b = test::randn(n, 2);
    std::vector<float> out(n, NAN);
    cpu::add(out.data(), a.data(), b.data(), n);
    std::vector<float> y = a;
    cpu::accumulate(y.data(), b.data(), n);
    std::vector<float> alias = a;
    cpu::add(alias.data(), alias.data(), b.data(), n);  // out aliases a
    std::vector<float> s = a;
    cpu::scale(s.data(), -0.5f, n);
    for (int64_t i = 0; i < n; i++) {
      ASSERT_EQ(out[i], a[i] + b[i]) << n << " " << i;
      ASSERT_EQ(y[i], a[i] + b[i]);
      ASSERT_EQ(alias[i], a[i] + b[i]);
      ASSERT_EQ(s[i], a[i] * -0.5f);
    }
  }
}

TEST(Elementwise, SumSquaresInDoubleAndDeterministic) {
  const int64_t n = 300001;  // several reduction chunks, ragged tail
  const auto x = test::randn(n, 3);
  long double want = 0;
  for (float v : x) want += (long double)v * v;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const double one = cpu::sum_squares(x.data(), n);
  omp_set_num_threads(2);
  const double two = cpu::sum_squares(x.data(), n);
  omp_set_num_threads(saved);
  EXPECT_NEAR(one, double(want), 1e-9 * double(want));  // a float accumulator would miss by ~1e-4
  EXPECT_EQ(one, two);  // same bits for any thread count
  EXPECT_EQ(cpu::sum_squares(x.data(), 0), 0.0);
  // d/dx_i sum x^2 = 2 x_i: central difference on one element, with values
  // chosen so that x +- h is exact in float and the difference exact in double.
  std::vector<float> y(x.begin(), x.begin() + 1000);
  const float h = 0.25f, x7 = 1.5f;
  y[7] = x7 + h;
  const double up = cpu::sum_squares(y.data(), 1000);
  y[7] -= 2 * h;
  const double dn = cpu::sum_squares(y.data(), 1000);
  EXPECT_NEAR((up - dn) / (2 * h), 2.0 * x7, 1e-9);
}

TEST(Elementwise, AllFiniteFindsNanAndInfAnywhere) {
  for (int64_t n : kSizes) {
    std::vector<float> x = test::randn(n, 4);
    EXPECT_TRUE(cpu::all_finite(x.data(), n));
    for (int64_t pos : {int64_t(0), n / 2, n - 1}) {
      for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()}) {
        const float keep = x[pos];
        x[pos] = bad;
        EXPECT_FALSE(cpu::all_finite(x.data(), n)) << n << " " << pos << " " << bad;
        x[pos] = keep;
      }
    }
    x[0] = std::numeric_limits<float>::max();
    x[n - 1] = std::numeric_limits<float>::denorm_min();
    EXPECT_TRUE(cpu::all_finite(x.data(), n));
  }
}

}  // namespace

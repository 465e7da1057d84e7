// Relative difference, for comparing a parallel run with its one-process
// reference: losses and norms change scale over a run, absolute tolerances
// would not.
#pragma once
#include <algorithm>
#include <cmath>

namespace tessera::test {

inline double rel(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-12); }

}  // namespace tessera::test

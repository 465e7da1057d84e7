// What every fuzz test needs around the driver: a scratch directory for the
// files a parser reads (test::ScratchDir), and the verdict on a target's tally.
#pragma once
#include <gtest/gtest.h>

#include "fuzz_driver.h"
#include "scratch_dir.h"

namespace tessera::fuzz {

using test::ScratchDir;

inline void expect_clean(const Tally& t) {
  for (size_t i = 0; i < t.failures.size() && i < 5; ++i) ADD_FAILURE() << t.failures[i];
  EXPECT_GT(t.ok + t.errors, 0);
}

}  // namespace tessera::fuzz

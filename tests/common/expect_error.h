// Checking the errors the engine throws: most tests care that a bad input is
// refused *and* that the message names what was wrong (the flag, the file,
// the line), so the matcher checks the words, not just the exception type.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tessera/core/error.h"

namespace tessera::test {

// The message of the tessera::Error that fn throws, or "" if it throws none.
template <typename Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Success when fn throws a tessera::Error whose message contains every
// needle. Use as EXPECT_TRUE(throws_error_with(...)) so that a failure points
// at the caller's line and prints the whole message.
template <typename Fn>
::testing::AssertionResult throws_error_with(Fn&& fn, const std::vector<std::string>& needles) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const std::string& n : needles)
      if (what.find(n) == std::string::npos)
        return ::testing::AssertionFailure() << "'" << n << "' not in: " << what;
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "expected a tessera::Error";
}

}  // namespace tessera::test

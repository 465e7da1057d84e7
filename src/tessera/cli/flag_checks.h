// Range checks shared by the commands' numeric flags, where they cannot wait
// for a config's validate(): the text of an unsigned flag, and the thread
// count every command that runs kernels takes.
#pragma once
#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <string>

#include "tessera/core/error.h"
#include "tessera/train/train_config.h"

namespace tessera::cli {

// CLI11 2.1 reads "-1" into an unsigned option as 2^64 - 1 (strtoull), so a
// seed of -1 would silently become another seed: an unsigned flag refuses a
// minus sign as text. CLI11 prefixes the flag's name to the message.
inline CLI::Validator not_negative() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        return s.find('-') == std::string::npos ? "" : "must be >= 0 (got " + s + ")";
      },
      "", "not negative");
}

// CLI11 2.1 reads an integer beyond int64 ("99999999999999999999") as
// INT64_MAX, so an overflowed count would silently become a huge one: a
// signed 64-bit flag refuses text that does not fit.
inline CLI::Validator fits_int64() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec == std::errc::result_out_of_range)
          return "does not fit a 64-bit integer (got " + clipped(s) + ")";
        return "";  // anything else is CLI11's to judge
      },
      "", "int64");
}

// --threads of any command: 0 (OpenMP's default) to kMaxThreads.
inline void check_threads(int64_t threads, const char* flag = "--threads") {
  TESSERA_CHECK(threads >= 0 && threads <= kMaxThreads, "{} must be in [0, {}] (got {})", flag,
                kMaxThreads, threads);
}

}  // namespace tessera::cli

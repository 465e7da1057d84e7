// Errors: one exception type carrying a message meant for a user.
// TESSERA_CHECK is for conditions a user can cause (bad flags, bad files);
// the CLI prints the message and exits nonzero on every rank.
#pragma once
#include <fmt/format.h>
#include <stdexcept>
#include <string>

namespace tessera {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace tessera

#define TESSERA_CHECK(cond, ...)                 \
  do {                                           \
    if (!(cond)) ::tessera::fail(__VA_ARGS__);   \
  } while (0)

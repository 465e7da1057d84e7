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

// An error every rank of a job raises at the same point with the same
// message (a diverged loss, a layout every rank validates alike): rank 0
// reports it for all.
struct CollectiveError : Error {
  using Error::Error;
};

// An error already reported to the user: exit nonzero without printing again.
struct ReportedError : Error {
  ReportedError() : Error("") {}
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

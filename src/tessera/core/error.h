// Errors: one exception type carrying a message meant for a user.
// TESSERA_CHECK is for conditions a user can cause (bad flags, bad files);
// the CLI prints the message and exits nonzero on every rank.
#pragma once
#include <fmt/format.h>
#include <stdexcept>
#include <string>
#include <string_view>

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

// An input value quoted in a message, at most `max` bytes of it: a 100 MB
// TOML string or a 300 MB line of merges.txt must not become a 100 MB
// error line. The middle is cut, and the cut says how much went.
inline std::string clipped(std::string_view text, size_t max = 200) {
  if (text.size() <= max) return std::string(text);
  const size_t head = max / 2, tail = max - head;
  return fmt::format("{}...[{} bytes cut]...{}", text.substr(0, head),
                     text.size() - head - tail, text.substr(text.size() - tail));
}

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace tessera

#define TESSERA_CHECK(cond, ...)                 \
  do {                                           \
    if (!(cond)) ::tessera::fail(__VA_ARGS__);   \
  } while (0)

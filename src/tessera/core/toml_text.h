// Reading a TOML file the user named (--config, --system, --model, a
// study), bounded before the parser sees it.
//
// The TOML parser caps the nesting of arrays and inline tables, but not of
// dotted keys: `a.a.a...a = 1` with ~50,000 parts builds a table 50,000
// levels deep, and both the parse and the table's destructor recurse once
// per level, overflowing the stack (a crash, exit 139). No real file nests
// keys deeply, so a key of more than kMaxTomlKeyParts parts is refused here,
// in one pass over the text, before any parse.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include "tessera/core/error.h"
#include "tessera/core/regular_file.h"

namespace tessera {

// Parts of one dotted key (a.b.c has 3), at most; a table header's key
// ([a.b.c]) counts the same way.
inline constexpr size_t kMaxTomlKeyParts = 64;

// Throws naming `file` and the line when a key of `text` has more than
// kMaxTomlKeyParts parts. Strings (basic, literal, multi-line) and comments
// are skipped, so their dots do not count; a key ends at '=', a header at
// ']'. A value's dots (1.5) never add up: '=' , ',' '{' '[' ']' '}' and a
// newline all start the count again.
inline void check_toml_key_depth(std::string_view text, const std::string& file) {
  size_t dots = 0, line = 1;
  size_t i = 0;
  const size_t n = text.size();
  auto skip_string = [&](char q) {  // i at the opening quote; leaves i after the closing one
    const bool multi = i + 2 < n && text[i + 1] == q && text[i + 2] == q;
    i += multi ? 3 : 1;
    while (i < n) {
      const char c = text[i];
      if (c == '\n') {
        ++line;
        if (!multi) return;  // an unterminated one-line string: the parser says so
      }
      if (c == '\\' && q == '"') {
        i += 2;
        continue;
      }
      if (c == q) {
        if (!multi) {
          ++i;
          return;
        }
        if (i + 2 < n && text[i + 1] == q && text[i + 2] == q) {
          i += 3;
          while (i < n && text[i] == q) ++i;  // up to two quotes may end the content
          return;
        }
      }
      ++i;
    }
  };
  while (i < n) {
    const char c = text[i];
    if (c == '"' || c == '\'') {
      skip_string(c);
      continue;
    }
    if (c == '#') {
      while (i < n && text[i] != '\n') ++i;
      continue;
    }
    if (c == '.') {
      TESSERA_CHECK(++dots < kMaxTomlKeyParts,
                    "{}: line {}: a dotted key of more than {} parts (nesting that deep is not "
                    "a configuration)",
                    file, line, kMaxTomlKeyParts);
    } else if (c == '\n' || c == '=' || c == ',' || c == '{' || c == '}' || c == '[' || c == ']') {
      dots = 0;
      if (c == '\n') ++line;
    }
    ++i;
  }
}

// The text of the TOML file `path` (a regular file: a pipe would block),
// its keys' depth checked. `what` names the role: "--config", "system file".
inline std::string read_toml_text(const std::string& path, const char* what) {
  std::string text = read_regular_file(path, what);
  check_toml_key_depth(text, path);
  return text;
}

}  // namespace tessera

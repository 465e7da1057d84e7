// Structure-aware inputs for the TOML files a user names (--system, --model,
// --config): byte mutations of TOML mostly end at the parser's first syntax
// error; these keep the file parsable and change what the reader must
// distrust, or build the shapes that once crashed a reader (issue 38):
// - a value replaced by an impossible one (0, negative, nan, inf, huge,
//   another type), a line dropped or repeated;
// - dotted keys and table headers of many parts (50,000 overflowed the
//   stack), with quoted parts, spaces and dots inside strings;
// - deep values (nested arrays and inline tables) and huge ones (long
//   strings, long numbers, many elements, many keys, long keys).
#pragma once
#include <string>
#include <vector>

#include "fuzz_driver.h"

namespace tessera::fuzz {

// The text without its comment lines (a system file is mostly its sources'
// notes; mutations belong on the values).
inline Bytes without_comment_lines(const Bytes& text) {
  Bytes out;
  size_t at = 0;
  while (at < text.size()) {
    size_t eol = text.find('\n', at);
    if (eol == Bytes::npos) eol = text.size();
    const Bytes line = text.substr(at, eol - at);
    const size_t first = line.find_first_not_of(" \t");
    if (first != Bytes::npos && line[first] != '#') out += line + "\n";
    at = eol + 1;
  }
  return out;
}

// Sizes for deep and huge values: mostly small, sometimes past every limit
// the readers have (arrays and inline tables nest 256 deep in the parser,
// keys 64 parts; strings are clipped to ~200 bytes in messages).
inline size_t skewed_size(Rand& r) {
  switch (r.below(10)) {
    case 0: case 1: case 2: return 1 + r.below(8);
    case 3: case 4: return 8 + r.below(120);
    case 5: return 60 + r.below(10);  // around the dotted-key limit (64)
    case 6: return 250 + r.below(12);  // around the parser's nesting limit (256)
    case 7: return 1000 + r.below(9000);
    case 8: return 10000 + r.below(40000);
    default: return r.chance(10) ? 200000 + r.below(800000) : 100 + r.below(2000);
  }
}

inline const std::vector<std::string>& toml_values() {
  static const std::vector<std::string> v = {
      "0", "-0", "1", "-1", "0.0", "-0.0", "1e-300", "1e308", "-1e308", "1e309", "nan", "-nan",
      "+nan", "inf", "-inf", "+inf", "0.5", "2", "3", "7", "65536", "2147483648",
      "9223372036854775807", "-9223372036854775808", "0x7fffffffffffffff", "0o777", "0b1",
      "1_000", "true", "false", "\"\"", "\"x\"", "''", "[]", "[0]", "[1, 2]", "{}",
      "{ fp32 = 0 }", "{ bf16 = nan }", "{ fp8 = -1 }", "1979-05-27T07:32:00Z", "07:32:00",
      "\"\\u0000\"", "\"\\uD800\""};
  return v;
}

// The (begin, end) of the value on a "key = value" line, or (0, 0).
inline std::pair<size_t, size_t> value_span(const Bytes& line) {
  const size_t eq = line.find('=');
  if (eq == Bytes::npos || line.find_first_not_of(" \t") == line.find('#')) return {0, 0};
  size_t b = line.find_first_not_of(" \t", eq + 1);
  if (b == Bytes::npos) return {0, 0};
  size_t e = line.find(" #", b);  // a trailing comment (strings with " #" are rare in seeds)
  if (e == Bytes::npos) e = line.size();
  return {b, e};
}

inline std::vector<Bytes> split_lines(const Bytes& text) {
  std::vector<Bytes> lines;
  size_t at = 0;
  while (at <= text.size()) {
    size_t eol = text.find('\n', at);
    if (eol == Bytes::npos) eol = text.size();
    lines.push_back(text.substr(at, eol - at));
    at = eol + 1;
  }
  return lines;
}

inline Bytes join_lines(const std::vector<Bytes>& lines) {
  Bytes out;
  for (const Bytes& l : lines) out += l + "\n";
  return out;
}

// One structural change to a TOML file's lines.
inline Bytes mutate_toml_text(const Bytes& text, Rand& r) {
  std::vector<Bytes> lines = split_lines(text);
  const int n = 1 + int(r.below(3));
  for (int k = 0; k < n && !lines.empty(); ++k) {
    const size_t i = r.below(lines.size());
    const auto [b, e] = value_span(lines[i]);
    switch (r.below(6)) {
      case 0:
      case 1:
      case 2:  // a value replaced: the reader's range checks
        if (e > b) lines[i].replace(b, e - b, toml_values()[r.below(toml_values().size())]);
        break;
      case 3: lines.erase(lines.begin() + long(i)); break;  // a key missing
      case 4: lines.insert(lines.begin() + long(r.below(lines.size())), lines[i]); break;  // twice
      default:  // a value copied from another line (a string where a number goes)
        if (e > b) {
          const Bytes& from = lines[r.below(lines.size())];
          const auto [fb, fe] = value_span(from);
          if (fe > fb) lines[i].replace(b, e - b, from.substr(fb, fe - fb));
        }
        break;
    }
  }
  return join_lines(lines);
}

// A key of `parts` parts in one of the spellings TOML allows.
inline Bytes dotted_key(Rand& r, size_t parts) {
  const int style = int(r.below(5));
  Bytes key;
  key.reserve(parts * 4);
  for (size_t p = 0; p < parts; ++p) {
    if (p > 0) key += style == 1 ? " . " : ".";
    switch (style) {
      case 2: key += "\"a.b\""; break;   // quoted parts with dots inside: one part each
      case 3: key += "'q'"; break;       // literal-quoted parts
      case 4: key += (p % 2 ? "device" : "gemm"); break;  // the readers' own table names
      default: key += "a"; break;
    }
  }
  return key;
}

// A line (or lines) with a key of many parts, somewhere a reader meets it.
inline Bytes dotted_key_line(Rand& r) {
  const Bytes key = dotted_key(r, skewed_size(r));
  switch (r.below(7)) {
    case 0: return "[" + key + "]\nx = 1";            // a table header
    case 1: return "[[" + key + "]]\nx = 1";          // an array-of-tables header
    case 2: return "x = { " + key + " = 1 }";         // inside an inline table
    case 3: return "s = \"\"\"\n" + key + " = 1\n\"\"\"";  // inside a string: not a key
    case 4: return "# " + key + " = 1";                // inside a comment: not a key
    case 5: return key + " = " + toml_values()[r.below(toml_values().size())];
    default: return key + " = 1";
  }
}

// A value deep, long or many.
inline Bytes deep_or_huge_value(Rand& r) {
  const size_t n = skewed_size(r);
  switch (r.below(9)) {
    case 0: return Bytes(n, '[') + "1" + Bytes(n, ']');            // nested arrays
    case 1: {                                                       // nested inline tables
      Bytes v;
      for (size_t i = 0; i < n; ++i) v += "{ a = ";
      v += "1";
      for (size_t i = 0; i < n; ++i) v += " }";
      return v;
    }
    case 2: return "\"" + Bytes(n, 'x') + "\"";                     // a long string
    case 3: return "'''" + Bytes(n, '\n') + "'''";                   // a long multi-line one
    case 4: return Bytes(n, '9');                                   // a long integer
    case 5: return "0." + Bytes(n, '1') + "e" + Bytes(1 + n % 30, '9');  // a long float
    case 6: {                                                       // many elements
      Bytes v = "[";
      for (size_t i = 0; i < n; ++i) v += i ? ", 1" : "1";
      return v + "]";
    }
    case 7: return Bytes(n, '[');                                   // never closed
    default: return "\"" + Bytes(n, '\\') + "\"";                   // escapes
  }
}

// A seed with something deep or huge put in: a new key, a value of an
// existing key replaced, many keys, or a long key.
inline Bytes with_deep_or_huge(const Bytes& seed, Rand& r) {
  std::vector<Bytes> lines = split_lines(seed);
  const size_t i = r.below(lines.size());
  switch (r.below(5)) {
    case 0:
    case 1: {
      const auto [b, e] = value_span(lines[i]);
      if (e > b) {
        lines[i].replace(b, e - b, deep_or_huge_value(r));
        break;
      }
      [[fallthrough]];
    }
    case 2: lines.insert(lines.begin() + long(i), "deep = " + deep_or_huge_value(r)); break;
    case 3: {  // many keys
      const size_t n = std::min<size_t>(skewed_size(r), 100000);
      Bytes many;
      for (size_t k = 0; k < n; ++k) many += "k" + std::to_string(k) + " = " + std::to_string(k) + "\n";
      lines.insert(lines.begin() + long(i), many);
      break;
    }
    default:  // a long key
      lines.insert(lines.begin() + long(i), Bytes(skewed_size(r), 'k') + " = 1");
      break;
  }
  return join_lines(lines);
}

// A seed with a many-part key put in at a random line.
inline Bytes with_dotted_key(const Bytes& seed, Rand& r) {
  std::vector<Bytes> lines = split_lines(seed);
  lines.insert(lines.begin() + long(r.below(lines.size() + 1)), dotted_key_line(r));
  return join_lines(lines);
}

}  // namespace tessera::fuzz

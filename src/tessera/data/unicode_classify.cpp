// classify(): a 64 KiB class table for the Basic Multilingual Plane (built
// once from the generated ranges; nearly all text lands there) and a binary
// search over the ranges for the supplementary planes.
#include <algorithm>
#include <array>

#include "tessera/data/unicode_tables.h"

namespace tessera::data::unicode {
namespace {

bool in_ranges(const CodeRange* r, size_t n, uint32_t cp) {
  // First range whose hi >= cp; cp is inside it iff lo <= cp.
  const CodeRange* it = std::lower_bound(r, r + n, cp, [](const CodeRange& a, uint32_t v) { return a.hi < v; });
  return it != r + n && it->lo <= cp;
}

CharClass classify_slow(uint32_t cp) {
  if (in_ranges(kLetterRanges, kLetterRanges_count, cp)) return kLetter;
  if (in_ranges(kNumberRanges, kNumberRanges_count, cp)) return kNumber;
  if (in_ranges(kSpaceRanges, kSpaceRanges_count, cp)) return kSpace;
  return kOther;
}

// (65536,) class of every BMP code point.
const std::array<uint8_t, 65536>& bmp_table() {
  static const std::array<uint8_t, 65536> table = [] {
    std::array<uint8_t, 65536> t{};
    for (uint32_t cp = 0; cp < 65536; ++cp) t[cp] = classify_slow(cp);
    return t;
  }();
  return table;
}

}  // namespace

CharClass classify(uint32_t cp) {
  if (cp < 65536) return CharClass(bmp_table()[cp]);
  if (cp > 0x10FFFF) return kOther;  // includes kInvalidCodePoint
  return classify_slow(cp);
}

}  // namespace tessera::data::unicode

// Unicode character classes for GPT-2's pre-tokenization: \p{L}, \p{N}, \s.
// The range tables are generated (gen_unicode_tables.py); classify() answers
// from a 64K-entry table for the BMP and a binary search above it.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tessera::data::unicode {

struct CodeRange {
  uint32_t lo, hi;  // inclusive
};

extern const CodeRange kLetterRanges[];
extern const size_t kLetterRanges_count;
extern const CodeRange kNumberRanges[];
extern const size_t kNumberRanges_count;
extern const CodeRange kSpaceRanges[];
extern const size_t kSpaceRanges_count;
extern const char* const kUnicodeVersion;

// The four classes the pattern distinguishes. kOther is everything else,
// including bytes that are not valid UTF-8 (as Python's U+FFFD would be).
enum CharClass : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };

CharClass classify(uint32_t cp);

}  // namespace tessera::data::unicode

// Lenient UTF-8 decoding for the pre-tokenizer. Any byte string decodes: a
// byte that does not start a well-formed sequence (stray continuation byte,
// overlong form, surrogate, > U+10FFFF, truncated sequence) becomes a
// one-byte "invalid" unit. Because every unit is a byte range of the input,
// pre-tokens are byte ranges too and encode/decode round-trips exactly.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tessera::data {

inline constexpr uint32_t kInvalidCodePoint = 0xFFFFFFFFu;

// Decodes the unit at s[i] (i < n). Returns its code point, or
// kInvalidCodePoint for an invalid byte; *len is the unit's byte length (1-4).
inline uint32_t utf8_decode(const unsigned char* s, size_t n, size_t i, int* len) {
  unsigned c = s[i];
  if (c < 0x80) {
    *len = 1;
    return c;
  }
  *len = 1;
  int need;
  uint32_t cp, min;
  if (c >= 0xC2 && c <= 0xDF) { need = 1; cp = c & 0x1F; min = 0x80; }
  else if (c >= 0xE0 && c <= 0xEF) { need = 2; cp = c & 0x0F; min = 0x800; }
  else if (c >= 0xF0 && c <= 0xF4) { need = 3; cp = c & 0x07; min = 0x10000; }
  else return kInvalidCodePoint;  // 0x80-0xC1 (continuation/overlong lead), 0xF5-0xFF
  if (i + need >= n) return kInvalidCodePoint;  // truncated at the end of the input
  for (int k = 1; k <= need; ++k) {
    unsigned d = s[i + k];
    if ((d & 0xC0) != 0x80) return kInvalidCodePoint;
    cp = (cp << 6) | (d & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return kInvalidCodePoint;
  *len = need + 1;
  return cp;
}

// Appends the UTF-8 encoding of cp (a valid scalar value) to out.
template <typename String>
inline void utf8_append(String& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

}  // namespace tessera::data

// GPT-2's byte <-> unicode table. vocab.json and merges.txt spell each byte
// as a printable code point: the printable Latin-1 bytes (! .. ~, ¡ .. ¬,
// ® .. ÿ) stand for themselves and the other 68 bytes map, in byte order, to
// U+0100.. (so ' ' is 'Ġ' U+0120 and '\n' is 'Ċ' U+010A).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::data {

struct ByteUnicode {
  std::array<uint32_t, 256> byte_to_cp;  // (256,) code point spelling each byte
  std::array<uint8_t, 256> order;        // (256,) bytes in GPT-2's vocab order: id k is byte order[k]
  std::array<int16_t, 256 + 68> from_cp; // (324,) byte spelled by code point cp, or -1
  int32_t cp_to_byte(uint32_t cp) const;  // -1 if cp spells no byte
};

const ByteUnicode& byte_unicode();

// Raw bytes -> GPT-2 spelling (UTF-8 of the mapped code points).
std::string bytes_to_gpt2(std::string_view bytes);
// GPT-2 spelling -> raw bytes; false if s is not valid UTF-8 or has a code
// point outside the table (e.g. a special token written as plain text).
bool gpt2_to_bytes(std::string_view s, std::string* bytes);

}  // namespace tessera::data

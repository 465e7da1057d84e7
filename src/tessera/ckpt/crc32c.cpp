#include "tessera/ckpt/crc32c.h"

#include <fmt/format.h>

#include <array>
#include <cstring>

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

namespace tessera::ckpt {

namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // CRC32C, reflected

// Slice-by-8 tables for machines without the crc32 instruction: table[k][b]
// is the CRC of byte b followed by k zero bytes.
struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  Tables() {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int i = 0; i < 8; ++i) c = (c >> 1) ^ (kPoly & (0u - (c & 1u)));
      t[0][b] = c;
    }
    for (int k = 1; k < 8; ++k)
      for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  }
};

uint32_t crc_sw(uint32_t c, const uint8_t* p, size_t n) {
  static const Tables T;
  const auto& t = T.t;
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);  // little-endian host assumed (x86-64, aarch64)
    w ^= c;
    c = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^ t[5][(w >> 16) & 0xff] ^ t[4][(w >> 24) & 0xff] ^
        t[3][(w >> 32) & 0xff] ^ t[2][(w >> 40) & 0xff] ^ t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
  return c;
}

}  // namespace

uint32_t crc32c_update(uint32_t crc, const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
#if defined(__SSE4_2__)
  uint64_t c64 = c;
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c64 = _mm_crc32_u64(c64, w);
    p += 8;
    n -= 8;
  }
  c = uint32_t(c64);
  while (n--) c = _mm_crc32_u8(c, *p++);
#else
  c = crc_sw(c, p, n);
#endif
  return ~c;
}

uint32_t crc32c_update_portable(uint32_t crc, const void* data, size_t n) {
  return ~crc_sw(~crc, static_cast<const uint8_t*>(data), n);
}

std::string crc32c_hex(uint32_t crc) { return fmt::format("0x{:08x}", crc); }

}  // namespace tessera::ckpt

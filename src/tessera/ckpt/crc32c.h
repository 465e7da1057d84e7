// CRC32C (Castagnoli), the checksum every checkpoint file carries. Chosen
// over a cryptographic hash because it runs at memory speed (one SSE4.2
// instruction per 8 bytes) and catches every burst error shorter than 32
// bits — what a torn write or a flipped byte on disk looks like.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::ckpt {

// Continue a CRC over `n` more bytes: crc32c_update(crc32c_update(0, a), b)
// equals the CRC of a followed by b. Start from 0.
uint32_t crc32c_update(uint32_t crc, const void* data, size_t n);

// The table-driven path, whatever the CPU has (tests compare the two).
uint32_t crc32c_update_portable(uint32_t crc, const void* data, size_t n);

inline uint32_t crc32c(const void* data, size_t n) { return crc32c_update(0, data, n); }

// "0x" + 8 lowercase hex digits: how metadata.json spells a checksum.
std::string crc32c_hex(uint32_t crc);

}  // namespace tessera::ckpt

// CRC-32 (IEEE 802.3, reflected, as zlib's crc32): carry-less-multiply folding where the CPU
// has PCLMULQDQ, table-driven (zlib) otherwise. Same results either way.
#pragma once
#include <cstddef>
#include <cstdint>

namespace uroce::wire {

// Continues a CRC exactly as zlib's crc32(crc, data, len) does (crc = 0 to start).
uint32_t crc32_update(uint32_t crc, const uint8_t* data, size_t len);
bool crc32_accelerated();

}  // namespace uroce::wire

// CRC-32 (IEEE 802.3, reflected, as zlib's crc32): carry-less-multiply folding where the CPU
// has it (512-bit VPCLMULQDQ, else 128-bit PCLMULQDQ), table-driven (zlib) otherwise. Same
// results every way.
#pragma once
#include <cstddef>
#include <cstdint>

namespace uroce::wire {

// Continues a CRC exactly as zlib's crc32(crc, data, len) does (crc = 0 to start).
uint32_t crc32_update(uint32_t crc, const uint8_t* data, size_t len);
bool crc32_accelerated();

enum class Crc32Impl { table, clmul, vpclmul };  // in order of speed
Crc32Impl crc32_best();  // what crc32_update uses on this CPU
// crc32_update with a given implementation, or the best this CPU has if it lacks that one.
uint32_t crc32_update_using(Crc32Impl impl, uint32_t crc, const uint8_t* data, size_t len);

}  // namespace uroce::wire

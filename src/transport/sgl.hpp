// Moving bytes between a scatter/gather list and a buffer: the NIC's local DMA. Every SGE
// touched is checked against the MR table first, so a stale or foreign key moves nothing.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/mr.hpp"

namespace uroce::transport {

enum class SglDir : uint8_t { ToBuffer, FromBuffer };

// Copies len bytes at byte offset `offset` of the list. FromBuffer writes into the list and
// needs LOCAL_WRITE. Returns the first failed check, or OutOfBounds if the list is too short.
inline core::KeyCheck sgl_copy(const core::MrTable& mrs, uint32_t pd, const Sge* sges, uint32_t n,
                               uint64_t offset, uint8_t* buf, uint32_t len, SglDir dir) {
  uint32_t need = dir == SglDir::FromBuffer ? uint32_t(kAccessLocalWrite) : 0u;
  for (uint32_t i = 0; i < n && len; ++i) {
    const Sge& s = sges[i];
    if (offset >= s.length) {
      offset -= s.length;
      continue;
    }
    uint32_t chunk = uint32_t(s.length - offset) < len ? uint32_t(s.length - offset) : len;
    uint64_t addr = s.addr + offset;
    if (core::KeyCheck k = mrs.check_local(s.lkey, pd, addr, chunk, need); k != core::KeyCheck::Ok) return k;
    if (dir == SglDir::ToBuffer)
      std::memcpy(buf, reinterpret_cast<const void*>(addr), chunk);
    else
      std::memcpy(reinterpret_cast<void*>(addr), buf, chunk);
    buf += chunk;
    len -= chunk;
    offset = 0;
  }
  return len ? core::KeyCheck::OutOfBounds : core::KeyCheck::Ok;
}

// Checks every SGE of a list up front (for errors that must be found before sending).
inline core::KeyCheck sgl_check(const core::MrTable& mrs, uint32_t pd, const Sge* sges, uint32_t n, uint32_t need) {
  for (uint32_t i = 0; i < n; ++i)
    if (core::KeyCheck k = mrs.check_local(sges[i].lkey, pd, sges[i].addr, sges[i].length, need);
        k != core::KeyCheck::Ok)
      return k;
  return core::KeyCheck::Ok;
}

}  // namespace uroce::transport

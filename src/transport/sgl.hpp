// Moving bytes between a scatter/gather list and a buffer: the NIC's local DMA. Every SGE
// touched is checked against the MR table first, so a stale or foreign key moves nothing.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "verbs/mr.hpp"
#include "verbs/region_access.hpp"

namespace uroce::transport {

// Visits the len bytes at byte offset `offset` of the list, each piece checked with `need`
// before copy(where it lies in this process, on demand?, position in the message buffer,
// bytes) moves it (an SGE names its MR's IOVA; the MR says where that lies). Returns the first
// failed check, OutOfBounds if the list is too short, or Missing if copy() found an on-demand
// page missing.
template <class Copy>
verbs::KeyCheck sgl_walk(const verbs::MrTable& mrs, verbs::PdHandle pd, const Sge* sges, uint32_t n, uint64_t offset,
                        uint32_t len, uint32_t need, Copy copy) {
  uint32_t done = 0;
  for (uint32_t i = 0; i < n && done < len; ++i) {
    const Sge& s = sges[i];
    if (offset >= s.length) {
      offset -= s.length;
      continue;
    }
    uint32_t chunk = uint32_t(s.length - offset) < len - done ? uint32_t(s.length - offset) : len - done;
    uint8_t* host = nullptr;
    bool odp = false;
    if (verbs::KeyCheck k = mrs.check_local(verbs::Lkey(s.lkey), pd, s.addr + offset, chunk, need, &host, &odp);
        k != verbs::KeyCheck::Ok)
      return k;
    if (!copy(host, odp, done, chunk)) return verbs::KeyCheck::Missing;
    done += chunk;
    offset = 0;
  }
  return done < len ? verbs::KeyCheck::OutOfBounds : verbs::KeyCheck::Ok;
}

// Gathers from the list into out (sending: the SGEs are only read).
inline verbs::KeyCheck sgl_gather(const verbs::MrTable& mrs, verbs::PdHandle pd, const Sge* sges, uint32_t n,
                                 uint64_t offset, uint8_t* out, uint32_t len) {
  return sgl_walk(mrs, pd, sges, n, offset, len, 0, [out](const uint8_t* host, bool odp, uint32_t at, uint32_t k) {
    return verbs::region_read(out + at, host, k, odp);
  });
}

// Scatters in into the list (receiving: the SGEs need LOCAL_WRITE).
inline verbs::KeyCheck sgl_scatter(const verbs::MrTable& mrs, verbs::PdHandle pd, const Sge* sges, uint32_t n,
                                  uint64_t offset, const uint8_t* in, uint32_t len) {
  return sgl_walk(mrs, pd, sges, n, offset, len, kAccessLocalWrite,
                  [in](uint8_t* host, bool odp, uint32_t at, uint32_t k) {
                    return verbs::region_write(host, in + at, k, odp);
                  });
}

// Whether the list holds the len bytes of `in` at `offset` (false too if a check fails).
inline bool sgl_equal(const verbs::MrTable& mrs, verbs::PdHandle pd, const Sge* sges, uint32_t n, uint64_t offset,
                      const uint8_t* in, uint32_t len) {
  bool same = true;
  return sgl_walk(mrs, pd, sges, n, offset, len, 0,
                  [&](const uint8_t* host, bool odp, uint32_t at, uint32_t k) {
                    uint8_t piece[256];  // an on-demand region is read a piece at a time
                    for (uint32_t i = 0; same && i < k; i += uint32_t(sizeof piece)) {
                      const uint32_t m = std::min<uint32_t>(k - i, sizeof piece);
                      const uint8_t* p = host + i;
                      if (odp && !verbs::region_read(piece, host + i, m, true)) return false;
                      same = std::memcmp(odp ? piece : p, in + at + i, m) == 0;
                    }
                    return true;
                  }) == verbs::KeyCheck::Ok &&
         same;
}

// The address of the len bytes at `offset` of the list if they lie in one SGE of a region that
// is not on demand and pass its checks; nullptr otherwise (the caller then gathers, which
// reports what failed).
inline const uint8_t* sgl_locate(const verbs::MrTable& mrs, verbs::PdHandle pd, const Sge* sges, uint32_t n,
                                 uint64_t offset, uint32_t len) {
  const uint8_t* at = nullptr;
  bool whole = false;
  bool odp = false;
  auto first = [&](const uint8_t* host, bool on_demand, uint32_t, uint32_t k) {
    if (!at) at = host;
    whole = whole || k == len;
    odp = odp || on_demand;
    return true;
  };
  return sgl_walk(mrs, pd, sges, n, offset, len, 0, first) == verbs::KeyCheck::Ok && whole && !odp ? at : nullptr;
}

// Checks every SGE of a list up front (for errors that must be found before sending).
inline verbs::KeyCheck sgl_check(const verbs::MrTable& mrs, verbs::PdHandle pd, const Sge* sges, uint32_t n, uint32_t need) {
  for (uint32_t i = 0; i < n; ++i)
    if (verbs::KeyCheck k = mrs.check_local(verbs::Lkey(sges[i].lkey), pd, sges[i].addr, sges[i].length, need);
        k != verbs::KeyCheck::Ok)
      return k;
  return verbs::KeyCheck::Ok;
}

}  // namespace uroce::transport

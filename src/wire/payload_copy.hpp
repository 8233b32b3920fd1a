// A payload's copy into memory the copying core does not hold (a target region, a ring slot
// the other core read last). glibc's memcpy copies pieces under 8 KiB with vector stores,
// each of which first reads its line in (read for ownership); `rep movsb` on a CPU with
// enhanced REP MOVSB (ERMS) writes whole lines without reading them. Measured on 4 KiB packets
// into a 64 MiB stream of targets, the receiver's copy so: 1.04x to 1.14x the bandwidth
// (docs/performance.md); the sender's copy into the ring so: no gain.
#pragma once
#include <cstddef>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace uroce::wire {

inline constexpr size_t kBulkCopyMin = 2048;  // below this memcpy's own choice stands

inline bool has_erms() {
#if defined(__x86_64__)
  static const bool erms = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 9));
  }();
  return erms;
#else
  return false;
#endif
}

// Sanitizer builds keep memcpy, which they check.
inline void payload_copy(void* to, const void* from, size_t n) {
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
  if (n >= kBulkCopyMin && has_erms()) {
    asm volatile("rep movsb" : "+D"(to), "+S"(from), "+c"(n) : : "memory");
    return;
  }
#endif
  std::memcpy(to, from, n);
}

}  // namespace uroce::wire

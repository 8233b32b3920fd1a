// Reaching registered memory: copies in and out, and the 8-byte atomics. A region registered on demand
// (kAccessOnDemand) promises nothing about its pages: they may be unmapped, or mapped read-only,
// at any moment, as a program's memory may. Its bytes are moved by the kernel
// (process_vm_readv/writev on this very process), where a missing page is an error (EFAULT)
// instead of a SIGSEGV in the NIC. Other regions are copied with memcpy: a program keeps them
// mapped while they are registered, as it does for a NIC that pins them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "wire/payload_copy.hpp"

namespace uroce::verbs {

// Whether this process may move its own memory with process_vm_readv/writev (a seccomp
// filter may forbid them): on-demand regions need it. Asked once.
bool odp_available();

// Slow paths, one system call each: false if a page was missing or not writable.
bool odp_read(void* to, const uint8_t* from, size_t n);
bool odp_write(uint8_t* to, const void* from, size_t n);

// Reads n bytes of a region at `from` (false: an on-demand page was missing).
inline bool region_read(void* to, const uint8_t* from, size_t n, bool odp) {
  if (odp) return odp_read(to, from, n);
  std::memcpy(to, from, n);
  return true;
}

// Writes n bytes into a region at `to` (false: an on-demand page was missing or read-only).
inline bool region_write(uint8_t* to, const void* from, size_t n, bool odp) {
  if (odp) return odp_write(to, from, n);
  wire::payload_copy(to, from, n);
  return true;
}

// An 8-byte atomic on region memory: compare-and-swap (cas) or fetch-and-add; orig gets the
// value before. Atomic against every other uroce atomic on this memory: all go through
// atomic_ref. On an on-demand region, a read and then a write, each failing on a missing page
// (nothing is written then): atomic among this device's operations, which run one at a time,
// not against CPU atomics of other processes on the same memory. False: a page was missing.
bool region_atomic(uint8_t* host, bool odp, bool cas, uint64_t compare, uint64_t swap_add, uint64_t& orig);

// ATOMIC WRITE: the 8 bytes at `bytes` stored at host (8-byte aligned) at once, so that no
// reader sees half of them; on an on-demand region, one write of the kernel's. False: a page
// was missing or read-only.
bool region_atomic_store(uint8_t* host, bool odp, const uint8_t* bytes);

}  // namespace uroce::verbs

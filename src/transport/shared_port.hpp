// The port of a host NIC that several processes share, each with its own protocol core: its
// transmit clock and each process's share of it, in one page the host NIC daemon makes for
// the device and maps into every process it attaches (link/host_nic.hpp). A process whose
// device has a port rate books its bytes on this clock, so that all of them together keep to
// the rate, and while others also wait for the port it runs only while within a window of the
// one furthest behind (bytes over its weight, start-time fair queueing between processes).
// Lock-free atomics only: no process waits for another, and none trusts another's values.
#pragma once
#include <atomic>
#include <cstdint>

namespace uroce::transport {

struct SharedPort {
  static constexpr uint32_t kMagic = 0x75706f72;  // "upor"
  static constexpr uint32_t kProcs = 64;          // the host NIC's steering slots
  uint32_t magic = kMagic;
  uint32_t procs = kProcs;
  std::atomic<uint64_t> free_at{0};  // CLOCK_MONOTONIC ns: when the bytes booked are out
  struct Proc {
    std::atomic<uint64_t> vbytes{0};        // bytes sent x 100 / weight
    std::atomic<uint64_t> waiting_until{0};  // it has packets waiting for the port until then
  };
  Proc proc[kProcs];
  // The host's classes (the flow table's "action prio" rules, written by the daemon): a QP
  // whose peer is in a class's prefix (and whose QPN in its range) sends in its priority,
  // whatever its DSCP maps to. A sequence lock: version is odd while the daemon writes.
  static constexpr uint32_t kClasses = 16;
  struct Class {
    uint8_t gid[16];
    uint8_t bits;  // prefix length within the GID (IPv4: 96 + its own)
    uint8_t prio;
    uint32_t qpn_lo, qpn_hi;
  };
  std::atomic<uint32_t> class_version{0};
  uint32_t nclasses = 0;
  Class classes[kClasses];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);

}  // namespace uroce::transport

#include "verbs/region_access.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace uroce::verbs {

// The region's side is the "remote" iovec: only a fault there is ours to report; the local
// side is the NIC's own buffer. A transfer cut short by a fault returns fewer bytes.
bool odp_read(void* to, const uint8_t* from, size_t n) {
  if (n == 0) return true;
  iovec local{to, n}, remote{const_cast<uint8_t*>(from), n};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == ssize_t(n);
}

bool odp_write(uint8_t* to, const void* from, size_t n) {
  if (n == 0) return true;
  iovec local{const_cast<void*>(from), n}, remote{to, n};
  if (process_vm_writev(getpid(), &local, 1, &remote, 1, 0) == ssize_t(n)) return true;
  // The fault may be the source's: a payload read where it lies in a same-host peer's file,
  // shrunk since. Copied first by the CPU, whose fault there reads zeros (link/shared_files.hpp),
  // only a fault in the region fails.
  uint8_t bounce[4096];
  for (size_t at = 0; at < n; at += sizeof bounce) {
    const size_t k = std::min(sizeof bounce, n - at);
    std::memcpy(bounce, static_cast<const uint8_t*>(from) + at, k);
    iovec l{bounce, k}, r{to + at, k};
    if (process_vm_writev(getpid(), &l, 1, &r, 1, 0) != ssize_t(k)) return false;
  }
  return true;
}

bool odp_available() {
  static const bool ok = [] {
    uint64_t a = 1, b = 0;
    return odp_read(&b, reinterpret_cast<const uint8_t*>(&a), 8) && b == 1;
  }();
  return ok;
}

bool region_atomic(uint8_t* host, bool odp, bool cas, uint64_t compare, uint64_t swap_add, uint64_t& orig) {
  if (odp) {
    if (!odp_read(&orig, host, 8)) return false;
    if (cas && orig != compare) return true;
    const uint64_t next = cas ? swap_add : orig + swap_add;
    return odp_write(host, &next, 8);
  }
  std::atomic_ref<uint64_t> target(*reinterpret_cast<uint64_t*>(host));
  if (cas) {
    orig = compare;
    target.compare_exchange_strong(orig, swap_add);
  } else {
    orig = target.fetch_add(swap_add);
  }
  return true;
}

bool region_atomic_store(uint8_t* host, bool odp, const uint8_t* bytes) {
  if (odp) return odp_write(host, bytes, 8);
  uint64_t v;
  std::memcpy(&v, bytes, 8);
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(host)).store(v);
  return true;
}

}  // namespace uroce::verbs

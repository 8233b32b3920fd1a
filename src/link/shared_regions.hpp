// Registered regions that live in a shared file (memfd, /dev/shm, hugetlbfs: the memory DPDK,
// SPDK and MPI programs register), which a same-host peer can map itself. For payloads read
// from such a region the same-host link sends where the bytes lie instead of the bytes, and the
// peer copies them once, straight into their destination (link/shm_place.cpp): one copy where
// the ring makes two. Private memory (malloc, anonymous mappings) keeps the ring.
//
// A region is looked up once, when it is registered (/proc/self/maps), and holds a descriptor
// of its file for as long as it is registered, which the peer opens through /proc/<pid>/fd.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace uroce::link {

// Where a region's bytes live: the file (a descriptor of this process), its identity, and the
// file offset of the region's first byte.
struct Backing {
  int fd = -1;
  uint64_t dev = 0, ino = 0;
  uint64_t offset = 0;
};

// Regions smaller than this are not looked up: a payload that small costs less to copy twice
// than a look at /proc at each registration.
inline constexpr size_t kMinSharedRegion = 64 * 1024;

// [addr, addr + len) within one shared mapping of a tmpfs or hugetlbfs file: its backing, with a
// descriptor of its own (close-on-exec); nothing for anything else.
std::optional<Backing> find_backing(const void* addr, size_t len);

class SharedRegions {
 public:
  struct Entry {
    const void* key;  // who registered it
    const uint8_t* addr;
    size_t len;
    Backing backing;
    // A later region found other memory at some of these addresses (this one's mapping was
    // replaced while it stayed registered): a payload there is not looked for in this file.
    bool stale = false;
  };
  // Looks [addr, addr + len) up and, if it is shared, keeps it under key until remove(key).
  // Regions kept before that overlap it and map those addresses otherwise become stale.
  void add(const void* key, const void* addr, size_t len);
  void remove(const void* key);
  // Changes with every add that kept a region and every remove of one.
  uint64_t generation() const { return gen_.load(std::memory_order_acquire); }
  // The regions now, and their generation.
  uint64_t snapshot(std::vector<Entry>& out) const;

 private:
  mutable std::mutex mu_;
  std::vector<Entry> all_;
  std::atomic<uint64_t> gen_{0};
};

// The process's regions (every device's).
SharedRegions& shared_regions();

// Whether [p, p + n) lies in e's region.
inline bool backing_of(const SharedRegions::Entry& e, const uint8_t* p, size_t n) {
  return !e.stale && p >= e.addr && n <= e.len && size_t(p - e.addr) <= e.len - n;
}

// The region of `entries` (a snapshot) that holds [p, p + n), or null.
inline const SharedRegions::Entry* backing_of(const std::vector<SharedRegions::Entry>& entries, const uint8_t* p,
                                              size_t n) {
  for (const auto& e : entries)
    if (backing_of(e, p, n)) return &e;
  return nullptr;
}

}  // namespace uroce::link

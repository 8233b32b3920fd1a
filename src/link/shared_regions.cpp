#include "link/shared_regions.hpp"

#include "link/shared_files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace uroce::link {

namespace {

struct Mapping {
  uintptr_t start = 0, end = 0;
  uint64_t offset = 0, dev = 0, ino = 0;
  bool shared = false;
  std::string path;
};

bool parse(const char* line, Mapping& m) {
  char perms[8] = {};
  unsigned maj = 0, min = 0;
  uint64_t ino = 0;
  int path_at = 0;
  if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s %" SCNx64 " %x:%x %" SCNu64 " %n", &m.start, &m.end, perms,
                  &m.offset, &maj, &min, &ino, &path_at) < 7)
    return false;
  m.dev = makedev(maj, min);
  m.ino = ino;
  m.shared = perms[3] == 's';
  m.path = path_at > 0 ? line + path_at : "";
  while (!m.path.empty() && (m.path.back() == '\n' || m.path.back() == ' ')) m.path.pop_back();
  return true;
}

// The one run of adjacent mappings of one file, at consecutive offsets, that holds
// [addr, addr + len); start, offset and path are its first mapping's.
std::optional<Mapping> mapping_of(uintptr_t addr, size_t len) {
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (!f) return std::nullopt;
  std::optional<Mapping> run;
  char line[4096 + 128];
  Mapping m;
  while (std::fgets(line, sizeof line, f)) {
    if (!parse(line, m)) continue;
    const bool continues = run && m.start == run->end && m.shared && m.dev == run->dev && m.ino == run->ino &&
                           m.offset == run->offset + (run->end - run->start);
    if (continues) {
      run->end = m.end;
    } else if (m.end > addr) {
      if (m.start > addr) break;  // addr is in no mapping, or the run before ended short of it
      run = m;
    } else {
      continue;
    }
    if (addr + len <= run->end) break;
  }
  std::fclose(f);
  if (!run || run->start > addr || addr + len > run->end || !run->shared || run->ino == 0) return std::nullopt;
  return run;
}

// The file by its path if it still has one, else among this process's descriptors (a memfd,
// or a file unlinked after mapping it). Only a tmpfs or hugetlbfs file (m.dev says) is looked for.
int open_file(const Mapping& m) {
  if (!shared_files::shared_file_device(m.dev)) return -1;
  shared_files::FileId id;
  if (!m.path.empty() && m.path[0] == '/' && !m.path.ends_with(" (deleted)")) {
    int fd = shared_files::open_shared(m.path.c_str(), false, m.dev, m.ino, 0, id);
    if (fd >= 0) return fd;
  }
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int found = -1;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long n = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end || n == dirfd(d)) continue;
    if (shared_files::identify(int(n), id) && id.dev == m.dev && id.ino == m.ino) {
      found = fcntl(int(n), F_DUPFD_CLOEXEC, 0);
      if (found >= 0) break;
    }
  }
  closedir(d);
  return found;
}

}  // namespace

std::optional<Backing> find_backing(const void* addr, size_t len) {
  if (!addr || len == 0) return std::nullopt;
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  std::optional<Mapping> m = mapping_of(a, len);
  if (!m) return std::nullopt;
  int fd = open_file(*m);
  if (fd < 0) return std::nullopt;
  return Backing{fd, m->dev, m->ino, m->offset + (a - m->start)};
}

// Whether [p, p + n), which e's region covers, lies where e says in e's file: by `now`, the
// backing of a range from now_at that holds all of it, or else by a look of its own.
static bool still_backed(const SharedRegions::Entry& e, const uint8_t* p, size_t n, std::optional<Backing> now,
                         const uint8_t* now_at) {
  if (!now) {
    if (!(now = find_backing(p, n))) return false;
    close(now->fd);
    now_at = p;
  }
  return now->dev == e.backing.dev && now->ino == e.backing.ino &&
         now->offset + uint64_t(p - now_at) == e.backing.offset + uint64_t(p - e.addr);
}

void SharedRegions::add(const void* key, const void* addr, size_t len) {
  const auto* p = static_cast<const uint8_t*>(addr);
  // A region still registered whose addresses a new registration finds holding other memory
  // (unmapped and mapped again meanwhile) places nothing more: its file no longer holds what a
  // work request there sends. One look at /proc (without the lock) when the new region lies
  // in one shared mapping, as a region registered again over the same memory does.
  std::vector<Entry> over;
  {
    std::lock_guard g(mu_);
    for (const Entry& e : all_)
      if (!e.stale && e.addr < p + len && p < e.addr + e.len) over.push_back(e);
  }
  const bool keep = len >= kMinSharedRegion;
  if (!keep && over.empty()) return;
  std::optional<Backing> b = find_backing(addr, len);
  std::vector<const void*> gone;
  for (const Entry& e : over) {
    const uint8_t* lo = std::max(p, e.addr);
    if (!still_backed(e, lo, size_t(std::min(p + len, e.addr + e.len) - lo), b, p)) gone.push_back(e.key);
  }
  if (b && !keep) {
    close(b->fd);
    b.reset();
  }
  std::lock_guard g(mu_);
  bool changed = false;
  for (Entry& e : all_)
    if (!e.stale && std::find(gone.begin(), gone.end(), e.key) != gone.end()) e.stale = changed = true;
  if (changed) gen_.fetch_add(1, std::memory_order_acq_rel);
  if (!b) return;
  for (const Entry& e : all_)  // one descriptor per file, however many regions lie in it
    if (e.backing.dev == b->dev && e.backing.ino == b->ino) {
      close(b->fd);
      b->fd = e.backing.fd;
      break;
    }
  all_.push_back({key, static_cast<const uint8_t*>(addr), len, *b});
  gen_.fetch_add(1, std::memory_order_acq_rel);
}

void SharedRegions::remove(const void* key) {
  std::lock_guard g(mu_);
  for (size_t i = 0; i < all_.size(); ++i)
    if (all_[i].key == key) {
      const int fd = all_[i].backing.fd;
      all_.erase(all_.begin() + ptrdiff_t(i));
      if (std::none_of(all_.begin(), all_.end(), [fd](const Entry& e) { return e.backing.fd == fd; })) close(fd);
      gen_.fetch_add(1, std::memory_order_acq_rel);
      return;
    }
}

uint64_t SharedRegions::snapshot(std::vector<Entry>& out) const {
  std::lock_guard g(mu_);
  out = all_;
  return gen_.load(std::memory_order_relaxed);
}

SharedRegions& shared_regions() {
  static SharedRegions* r = new SharedRegions;  // never destroyed: devices may outlive statics
  return *r;
}

}  // namespace uroce::link

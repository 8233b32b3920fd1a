// Placed payloads on the same-host link (link/shared_regions.hpp): a payload read from a region
// that lives in a shared file goes into the ring as where it lies (shm::Placed), and the
// receiver hands the transport the bytes in its own mapping of that file, which the transport
// copies once, after its checks, into their destination. The ring's two copies become one, and
// the sender copies nothing.
//
// The receiver offers it when a channel starts, if it can open the peer's files through
// /proc/<pid>/fd (the same user, in a PID namespace it sees). What it is told is checked: the
// file must be the one named (device and inode), a regular tmpfs or hugetlbfs file, long enough
// for the payload; a packet that fails is dropped and counted, and the transport sends it
// again (by then perhaps copied). A peer that shrinks its file under a payload in flight reads
// as zeros from then on (below), and never kills the receiver.
#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>

#include "link/shm_channel.hpp"
#include "link/shm_link.hpp"

namespace uroce::link {

namespace {

constexpr size_t kMaxImports = 16;  // files mapped per channel; the least recently used goes

// ---- a peer's file shrunk under our mapping of it
// Reading a page past the new end of a mapped file is SIGBUS. Wherever that read happens (the
// transport's copy into a region, a held packet's copy), the handler puts zero pages in place
// of the whole mapping and the read goes on; the link sees the mark and maps the file again
// before the next payload. What a peer sends from memory it pulled away arrives as zeros (its
// own data); it kills nobody.

constexpr size_t kMaxMapped = 1024;  // files mapped at once in the process, all channels
struct Mapped {
  std::atomic<uintptr_t> start{0}, end{0};
};
Mapped g_mapped[kMaxMapped];
std::atomic<uint64_t> g_zeroed{0};  // mappings replaced so far
struct sigaction g_before;          // what SIGBUS did before: faults that are not ours go there

void on_sigbus(int sig, siginfo_t* info, void* ctx) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Mapped& m : g_mapped) {
    const uintptr_t start = m.start.load(std::memory_order_acquire), end = m.end.load(std::memory_order_acquire);
    if (start && start <= a && a < end) {
      mmap(reinterpret_cast<void*>(start), end - start, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
      g_zeroed.fetch_add(1, std::memory_order_release);
      return;
    }
  }
  if (g_before.sa_flags & SA_SIGINFO) {
    g_before.sa_sigaction(sig, info, ctx);
  } else if (g_before.sa_handler != SIG_IGN && g_before.sa_handler != SIG_DFL) {
    g_before.sa_handler(sig);
  } else {  // the default: the faulting access, done again, ends the process as it would have
    signal(SIGBUS, SIG_DFL);
  }
}

std::mutex g_mapped_mu;  // who adds and removes (the handler only reads)

// Watches [p, p + n) for its file's shrinking; false if too many are watched already.
bool watch_mapping(const uint8_t* p, size_t n) {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa{};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_before);
  });
  std::lock_guard g(g_mapped_mu);
  for (Mapped& m : g_mapped)
    if (m.start.load(std::memory_order_relaxed) == 0) {
      m.end.store(reinterpret_cast<uintptr_t>(p) + n, std::memory_order_release);
      m.start.store(reinterpret_cast<uintptr_t>(p), std::memory_order_release);
      return true;
    }
  return false;
}

void unmap(const shm::Import& i) {
  {
    std::lock_guard g(g_mapped_mu);
    for (Mapped& m : g_mapped)
      if (m.start.load(std::memory_order_relaxed) == reinterpret_cast<uintptr_t>(i.base)) {
        m.start.store(0, std::memory_order_release);
        m.end.store(0, std::memory_order_release);
        break;
      }
  }
  munmap(const_cast<uint8_t*>(i.base), i.size);
}

}  // namespace

// On the watcher's thread as a channel is adopted: the peer's placed payloads are welcome if
// its files can be opened from here.
void SameHostLink::offer_placed(Channel& c, int sock) {
  ucred cr{};
  socklen_t len = sizeof cr;
  if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || cr.pid <= 0) return;
  const std::string dir = "/proc/" + std::to_string(cr.pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  bool ok = false;
  while (dirent* e = readdir(d)) {  // the first descriptor it has: may it be opened from here?
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    int fd = openat(dirfd(d), e->d_name, O_PATH | O_CLOEXEC);
    ok = fd >= 0;
    if (fd >= 0) close(fd);
    break;
  }
  closedir(d);
  if (!ok) return;
  c.peer_pid = cr.pid;
  c.rx->takes_placed.store(1, std::memory_order_release);
}

void SameHostLink::unmap_imports(Channel& c) {
  for (const shm::Import& i : c.imports) unmap(i);
  c.imports.clear();
}

// A packet whose payload lies in a shared file goes as its slot: the descriptor, then the
// packet's bytes before and after the payload. Into the ring, or the backlog behind it (a slot
// of a hundred bytes, where a copied packet would take its whole payload). 1: queued, 0: the
// backlog is full (dropped), -1: not placed (the caller copies it).
int SameHostLink::push_placed(Channel& c, const wire::PacketBuf& p) {
  // Only packets built for this link (no ICRC: the receiver's transport takes a payload apart
  // from nothing else).
  if (!p.ref || p.ref_len < shm::kMinPlaced || p.ref_len % 4 || !p.icrc_skipped || pcap_ ||
      !c.tx->takes_placed.load(std::memory_order_relaxed))
    return -1;
  const SharedRegions::Entry* e = nullptr;
  if (last_region_ < regions_.size() && backing_of(regions_[last_region_], p.ref, p.ref_len)) {
    e = &regions_[last_region_];
  } else if ((e = backing_of(regions_, p.ref, p.ref_len))) {
    last_region_ = size_t(e - regions_.data());
  } else {
    return -1;
  }
  const shm::Placed d{e->backing.dev, e->backing.ino, e->backing.offset + uint64_t(p.ref - e->addr), e->backing.fd,
                      p.ref_at, p.ref_len, 0};
  const uint32_t after = p.ref_at + p.ref_len, rest = p.len - p.ref_len;
  uint8_t slot[sizeof d + wire::kMaxPacket - shm::kMinPlaced];
  if (rest > sizeof slot - sizeof d) return -1;
  std::memcpy(slot, &d, sizeof d);
  std::memcpy(slot + sizeof d, p.data, p.ref_at);
  std::memcpy(slot + sizeof d + p.ref_at, p.data + after, p.len - after);
  const std::span<const uint8_t> bytes(slot, sizeof d + rest);
  constexpr uint32_t kFlags = shm::kSlotPlaced | shm::kSlotNoIcrc;
  if (c.backlog.empty() && c.tx->push(bytes, kFlags, p.flow, c.tx_tail, c.tx_head_seen)) {
    ++st_.tx_placed;
    return 1;
  }
  if (c.backlog.full()) return 0;
  c.backlog.push(bytes, kFlags, p.flow);
  ++backlogged_;
  ++st_.tx_placed;
  return 1;
}

// The payload a descriptor names, in this side's mapping of the peer's file; null if the file
// cannot be opened or mapped, is not the one named, or is too short.
const uint8_t* SameHostLink::resolve(Channel& c, const shm::Placed& d) {
  const uint64_t end = d.offset + d.len;
  if (end < d.offset) return nullptr;
  if (const uint64_t z = g_zeroed.load(std::memory_order_acquire); z != c.zeroed_seen) {
    unmap_imports(c);  // one of them may be zeros now: each is mapped again when next named
    c.zeroed_seen = z;
  }
  for (shm::Import& i : c.imports)
    if (i.dev == d.dev && i.ino == d.ino && end <= i.size) {
      i.used = ++receives_;
      return i.base + d.offset;
    }
  if (!c.peer_pid || d.fd < 0) return nullptr;
  // Looked at through a path-only descriptor first: a device or FIFO the peer names is never
  // opened (an open may do things), only a file that is what the descriptor said.
  const std::string path = "/proc/" + std::to_string(c.peer_pid) + "/fd/" + std::to_string(d.fd);
  const int at = open(path.c_str(), O_PATH | O_CLOEXEC);
  if (at < 0) return nullptr;
  struct stat st{};
  struct statfs fs{};
  int fd = -1;
  if (fstat(at, &st) == 0 && S_ISREG(st.st_mode) && uint64_t(st.st_dev) == d.dev && uint64_t(st.st_ino) == d.ino &&
      fstatfs(at, &fs) == 0 && (fs.f_type == TMPFS_MAGIC || fs.f_type == HUGETLBFS_MAGIC) &&
      uint64_t(st.st_size) >= end)
    fd = open(("/proc/self/fd/" + std::to_string(at)).c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  close(at);
  struct stat again{};
  void* m = MAP_FAILED;
  if (fd >= 0 && fstat(fd, &again) == 0 && again.st_dev == st.st_dev && again.st_ino == st.st_ino)
    m = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  if (fd >= 0) close(fd);
  if (m == MAP_FAILED) return nullptr;
  if (!watch_mapping(static_cast<const uint8_t*>(m), size_t(st.st_size))) {
    munmap(m, size_t(st.st_size));
    return nullptr;
  }
  // The same file mapped shorter before (it grew since) goes, as does the least recently used.
  auto stale = std::find_if(c.imports.begin(), c.imports.end(),
                            [&](const shm::Import& i) { return i.dev == d.dev && i.ino == d.ino; });
  if (stale == c.imports.end() && c.imports.size() >= kMaxImports)
    stale = std::min_element(c.imports.begin(), c.imports.end(),
                             [](const shm::Import& a, const shm::Import& b) { return a.used < b.used; });
  if (stale != c.imports.end()) {
    unmap(*stale);
    c.imports.erase(stale);
  }
  c.imports.push_back({d.dev, d.ino, static_cast<const uint8_t*>(m), size_t(st.st_size), ++receives_});
  return c.imports.back().base + d.offset;
}

// A placed packet at the front of c's ring (rx_buf_ holds its slot's length and flow).
void SameHostLink::deliver_placed(Channel& c, const shm::Slot& s, PacketSink& sink, uint64_t now,
                                  const wire::Ipv4Fields& sent) {
  shm::Placed d;
  if (rx_buf_.len < sizeof d) {
    ++st_.rx_malformed;
    return;
  }
  std::memcpy(&d, s.data, sizeof d);  // read once: the peer may write its slot meanwhile
  const uint32_t rest = rx_buf_.len - uint32_t(sizeof d);
  if (d.at > rest || d.len == 0 || d.len > wire::kMaxPacket - rest) {
    ++st_.rx_malformed;
    return;
  }
  const uint8_t* payload = resolve(c, d);
  if (!payload) {
    ++st_.rx_placed_refused;
    return;
  }
  ++st_.rx_placed;
  if (pcap_) {  // a capture shows the packet whole, as a NIC would have sent it
    std::memcpy(rx_buf_.data, s.data + sizeof d, d.at);
    std::memcpy(rx_buf_.data + d.at, payload, d.len);
    std::memcpy(rx_buf_.data + d.at + d.len, s.data + sizeof d + d.at, rest - d.at);
    rx_buf_.len = rest + d.len;
    wire::Ipv4Fields ip = sink.deliver({rx_buf_.data, rx_buf_.len}, rx_buf_.flow, now, sent);
    shm::complete_icrc(rx_buf_);
    pcap_->write(rx_buf_.flow, {rx_buf_.data, rx_buf_.len}, now, ip);
    return;
  }
  sink.deliver_apart({s.data + sizeof d, rest}, {d.at, {payload, d.len}}, rx_buf_.flow, now, sent);
}

}  // namespace uroce::link

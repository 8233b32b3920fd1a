// Placed payloads on the same-host link (link/shared_regions.hpp): a payload read from a region
// that lives in a shared file goes into the ring as where it lies (shm::Placed), and the
// receiver hands the transport the bytes in its own mapping of that file, which the transport
// copies once, after its checks, into their destination. The ring's two copies become one, and
// the sender copies nothing. Only payloads whose work request completes on the peer's answer
// are placed (RC and XRC requests, READ responses): a UC request completes once sent, and its
// buffer is the program's again before the peer would read it.
//
// The receiver offers it when a channel starts, if it can open the peer's files through
// /proc/<pid>/fd (the same user, in a PID namespace it sees). What it is told is checked: the
// file must be the one named (device and inode), a regular file on a tmpfs or hugetlbfs device,
// long enough for the payload, and it is looked at without asking any other file system
// anything (link/shared_files.hpp). It maps a window of the file around the payload, not the
// file. A packet that fails is dropped and counted, and the receiver asks the sender to copy
// for a second: the transport sends the packet again, copied. A peer that shrinks its file
// under a payload in flight reads as zeros from then on (shared_files.hpp), and never kills
// the receiver.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "link/shared_files.hpp"
#include "link/shm_channel.hpp"
#include "link/shm_link.hpp"

namespace uroce::link {

namespace {

constexpr size_t kMaxImports = 16;  // windows mapped per channel; the least recently used goes
// A window of a peer's file: this much, aligned to it (or to the file's huge pages), cut at
// the file's end.
constexpr uint64_t kWindow = 64ull << 20;
// After a refusal the sender copies for this long, twice as long after each refusal in a row
// (up to 64 times): a file this side can never map (another mount namespace's tmpfs, no guard
// left) costs a resend now and then, not every second.
constexpr uint64_t kRefusedBackoffNs = 1'000'000'000;
constexpr uint32_t kRefusedBackoffDoublings = 6;

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
  c.rx->takes_placed.store(shm::kTakesAll, std::memory_order_release);
}

void SameHostLink::unmap_imports(Channel& c) {
  for (const shm::Import& i : c.imports) shared_files::unmap(i.base, i.size);
  c.imports.clear();
}

// A window holds its whole file: pages a peer let go of (a region deregistered, its file
// closed) stay allocated while it is mapped, huge pages out of their pool. One unused for this
// long goes, whether or not packets arrive (next_deadline()).
constexpr uint64_t kImportIdleNs = 2'000'000'000;

void SameHostLink::unmap_idle_imports(uint64_t now) {
  sweep_at_ = UINT64_MAX;
  for (Channel* c : live_)
    std::erase_if(c->imports, [this, now](const shm::Import& i) {
      // A pass's clock may be a little behind the use it sees.
      if (now < i.used_ns || now - i.used_ns < kImportIdleNs) {
        sweep_at_ = std::min(sweep_at_, i.used_ns + kImportIdleNs);
        return false;
      }
      shared_files::unmap(i.base, i.size);
      return true;
    });
}

uint64_t SameHostLink::next_deadline() const { return sweep_at_; }

// A packet whose payload lies in a shared file goes as its slot: the descriptor, then the
// packet's bytes before and after the payload. Into the ring, or the backlog behind it (a slot
// of a hundred bytes, where a copied packet would take its whole payload). MIDDLE packets of
// one message that follow one another in the file gather into one slot (a run) for a peer that
// takes runs: its transport takes them as one. 1: queued, 0: the backlog is full (dropped),
// -1: not placed (the caller copies it).
int SameHostLink::push_placed(Channel& c, const wire::PacketBuf& p) {
  // push() saw a payload by reference of kMinPlaced or more.
  const uint32_t takes = c.tx->takes_placed.load(std::memory_order_relaxed);
  if (!p.ref_until_answered || !shm::goes_apart(p) || pcap_ || !(takes & shm::kTakesPlaced)) return -1;
  const SharedRegions::Entry* e = nullptr;
  if (last_region_ < regions_.size() && backing_of(regions_[last_region_], p.ref, p.ref_len)) {
    e = &regions_[last_region_];
  } else if ((e = backing_of(regions_, p.ref, p.ref_len))) {
    last_region_ = size_t(e - regions_.data());
  } else {
    return -1;
  }
  const shm::Placed d{e->backing.dev, e->backing.ino, e->backing.offset + uint64_t(p.ref - e->addr), e->backing.fd,
                      p.ref_at, p.ref_len, 1};
  const uint32_t after = p.ref_at + p.ref_len, rest = p.len - p.ref_len;
  if (rest > sizeof run_.slot - sizeof d) return -1;
  if (run_.c && extends_run(c, p, d)) {
    shm::Placed& first = *reinterpret_cast<shm::Placed*>(run_.slot);
    first.len += p.ref_len;
    ++first.packets;
    return 1;
  }
  close_run();
  // A MIDDLE packet to a peer that takes runs opens one: the next ones may gather into its slot.
  const bool opens_run =
      (takes & shm::kTakesRuns) && (wire::opcode_info(wire::Opcode(p.data[0])).flags & wire::kMiddle);
  uint8_t slot[sizeof run_.slot];
  uint8_t* out = opens_run ? run_.slot : slot;
  std::memcpy(out, &d, sizeof d);
  std::memcpy(out + sizeof d, p.data, p.ref_at);
  std::memcpy(out + sizeof d + p.ref_at, p.data + after, p.len - after);
  if (opens_run) {
    run_.c = &c;
    run_.flow = p.flow;
    run_.bytes = uint32_t(sizeof d + rest);
    return 1;
  }
  if (!push_slot(c, {slot, sizeof d + rest}, shm::kSlotPlaced | shm::kSlotNoIcrc, p.flow)) return 0;
  ++st_.tx_placed;
  return 1;
}

// The next packet continues the run: the same message's next PSN, its payload right after the
// run's in the same file (where the receiver reads it, whatever mapping the sender's is), and
// every other byte the same.
bool SameHostLink::extends_run(const Channel& c, const wire::PacketBuf& p, const shm::Placed& d) const {
  const shm::Placed& first = *reinterpret_cast<const shm::Placed*>(run_.slot);
  const uint8_t* h = run_.slot + sizeof first;  // the first packet's bytes but its payload
  const uint32_t after = p.ref_at + p.ref_len;
  return run_.c == &c && first.packets < wire::kMaxRunPackets &&
         d.len == first.len / first.packets && d.at == first.at && d.dev == first.dev && d.ino == first.ino &&
         d.fd == first.fd && d.offset == first.offset + first.len && p.len - p.ref_len == run_.bytes - sizeof first &&
         p.flow == run_.flow && wire::bth_follows(h, p.data, first.packets) &&
         std::memcmp(p.data + wire::kBthLen, h + wire::kBthLen, p.ref_at - wire::kBthLen) == 0 &&
         std::memcmp(p.data + after, h + p.ref_at, p.len - after) == 0;
}

void SameHostLink::close_run() {
  if (!run_.c) return;
  Channel& c = *std::exchange(run_.c, nullptr);
  const uint32_t n = reinterpret_cast<const shm::Placed*>(run_.slot)->packets;
  if (push_slot(c, {run_.slot, run_.bytes}, shm::kSlotPlaced | shm::kSlotNoIcrc, run_.flow)) {
    st_.tx_placed += n;
    st_.tx_runs += n > 1;
    return;
  }
  st_.tx_full_drops += n;  // send() counted them as sent
  st_.tx_packets -= n;
}

bool SameHostLink::push_slot(Channel& c, std::span<const uint8_t> bytes, uint32_t flags, const wire::FlowAddr& flow) {
  if (c.backlog.empty() && c.tx->push(bytes, flags, flow, c.tx_tail, c.tx_head_seen)) return true;
  if (c.backlog.full()) return false;
  c.backlog.push(bytes, flags, flow);
  ++backlogged_;
  return true;
}

// The payload a descriptor names, in this side's mapping of a window of the peer's file; null
// if the file cannot be opened or mapped, is not the one named, or is too short.
const uint8_t* SameHostLink::resolve(Channel& c, const shm::Placed& d, uint64_t now) {
  const uint64_t end = d.offset + d.len;
  if (end < d.offset) return nullptr;
  if (const uint64_t z = shared_files::zeroed(); z != c.zeroed_seen) {
    unmap_imports(c);  // one of them may be zeros now: each is mapped again when next named
    c.zeroed_seen = z;
  }
  for (shm::Import& i : c.imports)
    if (i.dev == d.dev && i.ino == d.ino && d.offset >= i.file_offset && end <= i.file_offset + i.size) {
      i.used_ns = now;
      return i.base + (d.offset - i.file_offset);
    }
  if (!c.peer_pid || d.fd < 0) return nullptr;
  const std::string path = "/proc/" + std::to_string(c.peer_pid) + "/fd/" + std::to_string(d.fd);
  shared_files::FileId id;
  const int fd = shared_files::open_shared(path.c_str(), true, d.dev, d.ino, end, id);
  if (fd < 0) return nullptr;
  // The window: aligned to kWindow, or to the file's huge pages where they are larger; it ends
  // at the file's end if that comes first.
  const uint64_t align = std::max<uint64_t>(kWindow, id.blksize);
  const uint64_t from = d.offset / align * align;
  const uint64_t len = std::min<uint64_t>(std::max(from + align, (end + align - 1) / align * align), id.size) - from;
  void* m = mmap(nullptr, size_t(len), PROT_READ, MAP_SHARED | MAP_NORESERVE, fd, off_t(from));
  close(fd);
  if (m == MAP_FAILED) return nullptr;
  // The channel's least recently used window goes first when it has its fill, or when the
  // process's guards are all taken.
  const bool full = c.imports.size() >= kMaxImports;
  bool guarded = !full && shared_files::guard(static_cast<const uint8_t*>(m), size_t(len));
  if (!guarded && !c.imports.empty()) {
    auto old = std::min_element(c.imports.begin(), c.imports.end(),
                                [](const shm::Import& a, const shm::Import& b) { return a.used_ns < b.used_ns; });
    shared_files::unmap(old->base, old->size);
    c.imports.erase(old);
    guarded = shared_files::guard(static_cast<const uint8_t*>(m), size_t(len));
  }
  if (!guarded) {
    munmap(m, size_t(len));
    return nullptr;
  }
  c.imports.push_back({d.dev, d.ino, from, static_cast<const uint8_t*>(m), size_t(len), now});
  sweep_at_ = std::min(sweep_at_, now + kImportIdleNs);
  return c.imports.back().base + (d.offset - from);
}

// A placed packet, or a run of them, at the front of c's ring (rx_buf_ holds its slot's length
// and flow): the packets delivered.
uint32_t SameHostLink::deliver_placed(Channel& c, const shm::Slot& s, PacketSink& sink, uint64_t now,
                                      const wire::Ipv4Fields& sent) {
  shm::Placed d;
  if (rx_buf_.len < sizeof d) {
    ++st_.rx_malformed;
    return 0;
  }
  std::memcpy(&d, s.data, sizeof d);  // read once: the peer may write its slot meanwhile
  const uint32_t rest = rx_buf_.len - uint32_t(sizeof d);
  const uint32_t n = std::max(d.packets, 1u);
  const std::optional<size_t> unit = wire::run_unit(n, d.at, d.len, rest);
  if (!unit || *unit < shm::kMinPlaced || !rx_buf_.icrc_skipped) {
    ++st_.rx_malformed;
    return 0;
  }
  const uint8_t* payload = resolve(c, d, now);
  if (!payload) {
    ++st_.rx_placed_refused;
    // The sender copies from now on, its resends too, until the channel takes them again.
    c.rx->takes_placed.store(0, std::memory_order_relaxed);
    c.placed_again_at = now + (kRefusedBackoffNs << std::min(c.refusals++, kRefusedBackoffDoublings));
    return 0;
  }
  c.refusals = 0;
  st_.rx_placed += n;
  st_.rx_runs += n > 1;
  hand_apart({s.data + sizeof d, rest}, {d.at, {payload, d.len}, n}, sink, now, sent);
  return n;
}

void SameHostLink::hand_apart(std::span<const uint8_t> rest, const wire::ApartPayload& apart, PacketSink& sink,
                              uint64_t now, const wire::Ipv4Fields& sent) {
  if (!pcap_) {
    sink.deliver_apart(rest, apart, rx_buf_.flow, now, sent);
    return;
  }
  // A capture shows each packet whole, as a NIC would have sent it.
  PacketSink::each_packet(rest, apart, [&](std::span<const uint8_t> whole) {
    std::memcpy(rx_buf_.data, whole.data(), whole.size());
    rx_buf_.len = uint32_t(whole.size());
    wire::Ipv4Fields ip = sink.deliver(whole, rx_buf_.flow, now, sent);
    shm::complete_icrc(rx_buf_);
    rx_buf_.icrc_skipped = true;  // for the next packet of the run
    pcap_->write(rx_buf_.flow, {rx_buf_.data, rx_buf_.len}, now, ip);
  });
}

}  // namespace uroce::link

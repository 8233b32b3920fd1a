#include "link/shm_link.hpp"

#include "link/fd_passing.hpp"
#include "link/shm_backlog.hpp"
#include "wire/headers.hpp"
#include "wire/icrc.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <utility>

namespace uroce::link {

namespace {

constexpr uint64_t kRetryNs = 1'000'000'000;  // a refused address is asked again after this


socklen_t registry_name(const Gid& addr, sockaddr_un& a) {
  std::memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  std::string name = "uroce-shm/" + std::to_string(getuid()) + "/" + addr.to_string();
  std::memcpy(a.sun_path + 1, name.data(), std::min(name.size(), sizeof a.sun_path - 2));
  return socklen_t(offsetof(sockaddr_un, sun_path) + 1 + std::min(name.size(), sizeof a.sun_path - 2));
}

// Channels are offered to and taken from the same user only.
bool same_user(int sock) {
  ucred c{};
  socklen_t len = sizeof c;
  return getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &c, &len) == 0 && c.uid == getuid();
}

void set_timeout(int sock) {
  timeval tv{1, 0};
  setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

void close_all(std::initializer_list<int> fds) {
  for (int fd : fds)
    if (fd >= 0) close(fd);
}

// Every live link, for the fork handler.
std::mutex g_links_mu;
std::vector<SameHostLink*> g_links;

}  // namespace

struct SameHostLink::Channel {
  std::vector<Gid> peer;  // the other device's addresses
  shm::Area* area = nullptr;
  shm::Ring* tx = nullptr;
  shm::Ring* rx = nullptr;
  int sock = -1, tx_efd = -1, rx_efd = -1;
  std::atomic<bool> dead{false};
  bool adopted = false;  // engine side: seen by refresh()
  shm::Backlog backlog;  // engine side: waiting for room in tx
  uint32_t tx_tail = 0, tx_head_seen = 0;  // engine side: see shm::Ring::push
};

SameHostLink::SameHostLink(Link& wire, PcapWriter* pcap) : wire_(wire), pcap_(pcap), own_(wire.gids()) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  skips_fd_ = epoll_create1(EPOLL_CLOEXEC);
  stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (wire_.rx_fd() >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wire_.rx_fd(), &ev);
  for (const Gid& g : own_) {
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un a;
    socklen_t len = registry_name(g, a);
    if (s >= 0 && bind(s, reinterpret_cast<sockaddr*>(&a), len) == 0 && listen(s, 64) == 0)
      listen_fds_.push_back(s);
    else if (s >= 0)
      close(s);
  }
  watcher_ = std::thread([this] { watch(); });
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, [] { for (SameHostLink* l : g_links) l->forked(); }); });
  std::lock_guard g(g_links_mu);
  g_links.push_back(this);
}

// In a child of fork(): the registry entries and channel sockets are the parent's. Kept open
// here, they would outlive the parent: its name would stay taken and its peers would never
// see it hang up. (The child has only the forking thread: no lock is taken.)
void SameHostLink::forked() {
  for (int& fd : listen_fds_) close(std::exchange(fd, -1));
  listen_fds_.clear();
  for (auto& c : all_) close(std::exchange(c->sock, -1));
}

SameHostLink::~SameHostLink() {
  {
    std::lock_guard g(g_links_mu);
    std::erase(g_links, this);
  }
  stopping_.store(true);
  uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof one);
  watcher_.join();
  for (int fd : listen_fds_) close(fd);
  for (auto& c : all_) {
    munmap(c->area, sizeof(shm::Area));
    close_all({c->sock, c->tx_efd, c->rx_efd});
  }
  close_all({epoll_fd_, skips_fd_, stop_fd_});
}

ShmStats SameHostLink::stats() const {
  ShmStats s = st_;
  s.channels = size_t(std::count_if(live_.begin(), live_.end(), [](Channel* c) { return !c->dead.load(); }));
  return s;
}

// ---------------------------------------------------------------- channels

SameHostLink::Channel* SameHostLink::adopt(int sock, int memfd, int tx_efd, int rx_efd, bool we_connected,
                                           std::vector<Gid> peer) {
  struct stat st{};
  void* m = MAP_FAILED;
  if (fstat(memfd, &st) == 0 && size_t(st.st_size) == sizeof(shm::Area))
    m = mmap(nullptr, sizeof(shm::Area), PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  close(memfd);
  if (m == MAP_FAILED) {
    close_all({sock, tx_efd, rx_efd});
    return nullptr;
  }
  auto* area = static_cast<shm::Area*>(m);
  if (area->magic != shm::kMagic || area->slots != shm::kSlots || area->slot_bytes != sizeof(shm::Slot)) {
    munmap(m, sizeof(shm::Area));
    close_all({sock, tx_efd, rx_efd});
    return nullptr;
  }
  auto c = std::make_unique<Channel>();
  c->peer = std::move(peer);
  c->area = area;
  c->tx = &area->ring[we_connected ? 0 : 1];
  c->rx = &area->ring[we_connected ? 1 : 0];
  c->sock = sock;
  c->tx_efd = tx_efd;
  c->rx_efd = rx_efd;
  epoll_event ev{};
  ev.events = EPOLLIN;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, rx_efd, &ev);
  Channel* raw = c.get();
  {
    std::lock_guard g(mu_);
    all_.push_back(std::move(c));
    gen_.fetch_add(1, std::memory_order_release);
  }
  uint64_t one = 1;  // the watcher watches the new socket from now on
  (void)!write(stop_fd_, &one, sizeof one);
  return raw;
}

SameHostLink::Channel* SameHostLink::connect_to(const Gid& dst) {
  int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a;
  socklen_t len = registry_name(dst, a);
  if (s < 0 || connect(s, reinterpret_cast<sockaddr*>(&a), len) != 0 || !same_user(s)) {
    close_all({s});
    return nullptr;
  }
  set_timeout(s);
  int memfd = memfd_create("uroce-shm", MFD_CLOEXEC);
  int e0 = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), e1 = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  void* m = MAP_FAILED;
  if (memfd >= 0 && ftruncate(memfd, sizeof(shm::Area)) == 0)
    m = mmap(nullptr, sizeof(shm::Area), PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (m == MAP_FAILED || e0 < 0 || e1 < 0) {
    close_all({s, memfd, e0, e1});
    return nullptr;
  }
  auto* area = new (m) shm::Area;
  area->magic = shm::kMagic;
  area->slots = shm::kSlots;
  area->slot_bytes = sizeof(shm::Slot);
  for (auto& r : area->ring) r.consumer_sleeping.store(1);  // wake each side until it polls
  munmap(m, sizeof(shm::Area));

  shm::Hello h{shm::kMagic, uint32_t(sizeof(shm::Area)), 0, {}};
  for (const Gid& g : own_)
    if (h.ngids < shm::kMaxPeerGids) h.gids[h.ngids++] = g;
  int fds[3] = {memfd, e0, e1};
  char ok = 0;
  if (!send_with_fds(s, &h, sizeof h, fds, 3) || recv(s, &ok, 1, 0) != 1 || ok != 'Y') {
    close_all({s, memfd, e0, e1});
    return nullptr;
  }
  return adopt(s, memfd, e0, e1, true, {dst});
}

// The watcher's side of a connection: the peer's hello and descriptors.
void SameHostLink::accept_one() {
  for (int lfd : listen_fds_) {
    int s = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (s < 0) continue;
    if (!same_user(s)) {
      close(s);
      continue;
    }
    set_timeout(s);
    shm::Hello h{};
    int fds[3] = {-1, -1, -1};
    int got = 0;
    ssize_t n = recv_with_fds(s, &h, sizeof h, fds, 3, &got);
    if (n != ssize_t(sizeof h) || got != 3 || h.magic != shm::kMagic || h.area_bytes != sizeof(shm::Area) ||
        h.ngids == 0 || h.ngids > shm::kMaxPeerGids) {
      close_all({s, fds[0], fds[1], fds[2]});
      continue;
    }
    // ring[0] is theirs to fill (its eventfd wakes us), ring[1] ours.
    Channel* c = adopt(s, fds[0], fds[2], fds[1], false, std::vector<Gid>(h.gids, h.gids + h.ngids));
    if (c) (void)!::send(s, "Y", 1, MSG_NOSIGNAL);
  }
}

void SameHostLink::watch() {
  std::vector<pollfd> p;
  std::vector<Channel*> watched;
  while (!stopping_.load()) {
    p.assign(1, pollfd{stop_fd_, POLLIN, 0});
    for (int fd : listen_fds_) p.push_back({fd, POLLIN, 0});
    watched.clear();
    {
      std::lock_guard g(mu_);
      for (auto& c : all_)
        if (!c->dead.load()) {
          watched.push_back(c.get());
          p.push_back({c->sock, POLLIN, 0});
        }
    }
    if (poll(p.data(), p.size(), -1) < 0) continue;
    uint64_t v;
    (void)!read(stop_fd_, &v, sizeof v);
    for (size_t i = 1; i <= listen_fds_.size(); ++i)
      if (p[i].revents) accept_one();
    for (size_t i = 0; i < watched.size(); ++i)
      if (p[1 + listen_fds_.size() + i].revents) {  // the peer hung up (or spoke out of turn)
        watched[i]->dead.store(true);
        gen_.fetch_add(1, std::memory_order_release);
      }
  }
}

// ---------------------------------------------------------------- engine side

void SameHostLink::refresh() {
  if (gen_.load(std::memory_order_acquire) == seen_gen_) return;
  std::lock_guard g(mu_);
  seen_gen_ = gen_.load(std::memory_order_acquire);
  live_.clear();
  const bool had_channels = wire_in_skips_;
  for (auto& c : all_) {
    // A peer that hung up may have sent its last packets just before (an unreliable QP's last
    // SEND completes when it is sent): a dead channel is read until its ring is empty.
    if (c->dead.load() && c->rx->ready() <= 0) {
      drop_backlog(*c);
      continue;
    }
    if (!c->adopted) {  // armed exactly while the engine thread sleeps on our fd
      c->adopted = true;
      if (armed_)
        (void)c->rx->arm();
      else
        c->rx->disarm();
    }
    live_.push_back(c.get());
  }
  // While channels exist, a polling thread leaves the wire to the engine thread.
  if (had_channels != !live_.empty() && wire_.rx_fd() >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    epoll_ctl(skips_fd_, live_.empty() ? EPOLL_CTL_DEL : EPOLL_CTL_ADD, wire_.rx_fd(), &ev);
    wire_in_skips_ = !live_.empty();
  }
}

SameHostLink::Channel* SameHostLink::find(const Gid& dst) const {
  for (Channel* c : live_)
    if (!c->dead.load(std::memory_order_relaxed))
      for (const Gid& g : c->peer)
        if (g == dst) return c;
  return nullptr;
}

SameHostLink::Channel* SameHostLink::route(const Gid& dst, uint64_t now) {
  refresh();  // a channel the peer offered since
  if (Channel* c = find(dst)) return c;
  if (listen_fds_.empty()) return nullptr;  // not in the registry ourselves: shared memory is off
  for (const Gid& g : own_)
    if (g == dst) return nullptr;  // ourselves: the wire link loops back
  auto it = refused_until_.find(dst);
  if (it != refused_until_.end() && now < it->second) return nullptr;
  Channel* c = connect_to(dst);
  if (!c) {
    refused_until_[dst] = now + kRetryNs;
    return nullptr;
  }
  refused_until_.erase(dst);
  refresh();
  return c;
}

// A full ring keeps the packet in the channel's backlog, in order, as a NIC's send queue
// waits for its link; only a backlog beyond its bound drops (counted).
bool SameHostLink::push(Channel& c, const wire::PacketBuf& p) {
  if (c.backlog.empty() && c.tx->push(p, c.tx_tail, c.tx_head_seen)) return true;
  if (c.backlog.full()) return false;
  c.backlog.push(p);
  ++backlogged_;
  return true;
}

// A peer that left takes nothing more: what waited for it must not keep the engine awake.
void SameHostLink::drop_backlog(Channel& c) {
  backlogged_ -= c.backlog.size();
  c.backlog.clear();
}

void SameHostLink::drain_backlogs() {
  if (!backlogged_) return;
  for (Channel* c : live_) {
    if (c->dead.load(std::memory_order_relaxed)) {
      drop_backlog(*c);
      continue;
    }
    size_t n = 0;
    for (; !c->backlog.empty(); c->backlog.pop(), ++n) {
      const shm::Backlog::Entry& e = c->backlog.front();
      if (!c->tx->push(c->backlog.front_bytes(), e.icrc_skipped, e.flow, c->tx_tail, c->tx_head_seen)) break;
    }
    if (!n) continue;
    backlogged_ -= n;
    wake_peer(*c);
  }
}

void SameHostLink::wake_peer(Channel& c) {
  if (c.tx->consumer_needs_wake()) {
    uint64_t one = 1;
    (void)!write(c.tx_efd, &one, sizeof one);
  }
}

bool SameHostLink::carries(const Gid& dst) const { return find(dst) != nullptr; }

// The ICRC a packet built for shared memory lacks, for the wire or a capture.
static void complete_icrc(wire::PacketBuf& p) {
  if (!p.icrc_skipped) return;
  wire::icrc_fill(p, p.len - wire::kIcrcLen);
  p.icrc_skipped = false;
}

void SameHostLink::send(std::span<wire::PacketBuf* const> pkts, uint64_t now) {
  refresh();
  drain_backlogs();
  rest_.clear();
  touched_.clear();
  for (wire::PacketBuf* p : pkts) {
    Channel* c = route(p->flow.dst, now);
    if (!c) {
      complete_icrc(*p);  // the channel it was built for is gone
      rest_.push_back(p);
      continue;
    }
    if (pcap_) {  // the capture shows the packet a NIC would put on a wire
      p->materialize();
      complete_icrc(*p);
    }
    if (!push(*c, *p)) {
      ++st_.tx_full_drops;  // lost as on a congested wire: the transport recovers
      continue;
    }
    ++st_.tx_packets;
    if (pcap_) pcap_->write(p->flow, {p->data, p->len}, now);
    if (std::find(touched_.begin(), touched_.end(), c) == touched_.end()) touched_.push_back(c);
  }
  for (Channel* c : touched_) wake_peer(*c);
  if (!rest_.empty()) wire_.send(rest_, now);
}

int SameHostLink::poll_rings(PacketSink& sink, uint64_t now, int max) {
  int n = 0;
  for (Channel* c : live_) {
    int ready = 0;
    while (n < max && (ready = c->rx->ready()) > 0) {
      const shm::Slot* s = c->rx->front(rx_buf_);
      if (!s) {
        c->rx->pop();
        ++st_.rx_malformed;
        continue;
      }
      // Delivered from the slot itself; a capture needs a copy it can complete the ICRC of.
      const uint8_t* bytes = s->data;
      if (pcap_) bytes = static_cast<const uint8_t*>(std::memcpy(rx_buf_.data, s->data, rx_buf_.len));
      std::span<const uint8_t> pkt(bytes, rx_buf_.len);
      wire::Ipv4Fields sent;  // what our sender writes
      sent.icrc_absent = rx_buf_.icrc_skipped;
      wire::Ipv4Fields ip = sink.deliver(pkt, rx_buf_.flow, now, sent);
      c->rx->pop();
      if (pcap_) {
        complete_icrc(rx_buf_);
        pcap_->write(rx_buf_.flow, pkt, now, ip);
      }
      ++st_.rx_packets;
      ++n;
    }
    if (ready < 0) {  // a slot no correct peer writes: stop listening to it
      c->dead.store(true);
      gen_.fetch_add(1, std::memory_order_release);
    }
  }
  return n;
}

int SameHostLink::receive(PacketSink& sink, uint64_t now, int max, bool wire) {
  refresh();
  drain_backlogs();
  int n = poll_rings(sink, now, max);
  // While the rings bring packets, a system call for the wire every pass would cost more than
  // they do: the wire is read on every 16th such pass, and on every pass they bring nothing.
  if (!wire || (n > 0 && ++busy_passes_ % 16 != 0)) return n;
  return n + wire_.poll_rx(sink, now, max - n);
}

int SameHostLink::poll_rx(PacketSink& sink, uint64_t now, int max) { return receive(sink, now, max, true); }

int SameHostLink::poll_rx_inline(PacketSink& sink, uint64_t now, int max) {
  // A system call costs more than all the rings: with same-host peers a polling thread reads
  // only the rings, and the engine thread, asleep on inline_skips_fd(), reads the wire.
  return receive(sink, now, max, live_.empty());
}

bool SameHostLink::prepare_sleep() {
  refresh();
  if (backlogged_) return false;  // the peer is draining: keep pushing
  for (Channel* c : live_)
    if (!c->rx->arm()) {
      for (Channel* d : live_) d->rx->disarm();
      return false;
    }
  armed_ = true;
  return true;
}

void SameHostLink::woke() {
  armed_ = false;
  for (Channel* c : live_) {
    c->rx->disarm();
    uint64_t v;
    (void)!read(c->rx_efd, &v, sizeof v);
  }
}

}  // namespace uroce::link

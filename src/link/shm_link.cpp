#include "link/shm_link.hpp"

#include "link/fd_passing.hpp"
#include "link/shm_channel.hpp"
#include "link/shm_registry.hpp"
#include "link/steering.hpp"
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
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

namespace uroce::link {

using shm::close_all;
using shm::kAnswerTime;
using shm::registry_name;

namespace {

constexpr uint64_t kRetryNs = 1'000'000'000;  // a refused address is asked again after this
// Ring packets taken in one pass. The transport ACKs at the end of a pass: 64 MTU-sized packets
// are about 25 us of copying, so the sender hears of them while the next are still arriving
// and keeps copying meanwhile, where a pass of 256 (1 MiB) made the two copies take turns.
constexpr int kRingBatch = 64;

// Every live link, for the fork handler.
std::mutex g_links_mu;
std::vector<SameHostLink*> g_links;

}  // namespace

// A step of construction that failed (EMFILE: out of descriptors) leaves the link unusable
// and says what it was; status() reports the first.
int SameHostLink::made(int fd, const char* what) {
  if (fd < 0 && status_) status_ = make_error(errno, std::string("same-host link: ") + what + ": " + std::strerror(errno));
  return fd;
}

SameHostLink::SameHostLink(Link& wire, PcapWriter* pcap, uint32_t slot)
    : wire_(wire), pcap_(pcap), own_(wire.gids()), slot_(slot) {
  epoll_fd_ = made(epoll_create1(EPOLL_CLOEXEC), "epoll_create1");
  skips_fd_ = made(epoll_create1(EPOLL_CLOEXEC), "epoll_create1");
  stop_fd_ = made(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), "eventfd");
  if (!status_) return;  // no watcher: the destructor has nothing to stop
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (wire_.rx_fd() >= 0 && made(epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wire_.rx_fd(), &ev), "epoll_ctl") < 0) return;
  for (const Gid& g : own_) {
    int s = made(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), "socket");
    if (s < 0) return;
    sockaddr_un a;
    socklen_t len = registry_name(g, slot_, a);
    if (bind(s, reinterpret_cast<sockaddr*>(&a), len) == 0 && listen(s, 64) == 0) {
      listen_fds_.push_back(s);
    } else if (errno == EADDRINUSE) {
      close(s);
      name_taken(g);
    } else {
      made(-1, "registry name");
      close(s);
      return;
    }
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
  if (watcher_.joinable()) {  // a link built in part has no watcher
    poke();
    watcher_.join();
  }
  for (int fd : listen_fds_) close(fd);
  for (auto& c : all_) release(*c);
  for (Dial& d : dials_) close_all({d.sock, d.memfd, d.e0, d.e1});
  close_all({epoll_fd_, skips_fd_, stop_fd_});
}

ShmStats SameHostLink::stats() const {
  ShmStats s = st_;
  s.offers_refused = refused_.load(std::memory_order_relaxed);
  s.channels = size_t(std::count_if(live_.begin(), live_.end(), [](Channel* c) { return !c->dead.load(); }));
  return s;
}

// ---------------------------------------------------------------- channels

namespace {

// The area's slots populated: a fault per slot on the first lap costs far more (performance.md).
// Not its payload entries (1 MiB a direction), which a channel that never carries a payload of
// 2 KiB or more never touches: they fault in on the first lap that uses them.
void populate_slots(shm::Area* area) {
  auto populate = [](const void* from, const void* to) {
    auto* lo = reinterpret_cast<uint8_t*>(reinterpret_cast<uintptr_t>(from) & ~uintptr_t(4095));
    const size_t n = size_t(static_cast<const uint8_t*>(to) - lo);
    if (madvise(lo, n, MADV_POPULATE_WRITE) == 0) return;
    for (size_t i = 0; i < n; i += 4096) (void)*reinterpret_cast<volatile uint8_t*>(lo + i);  // before Linux 5.14
  };
  populate(area, area->ring[0].payload);
  populate(&area->ring[1], area->ring[1].payload);
}

}  // namespace

// Only a memfd sealed at its size is mapped: a file the peer could shrink would turn our next
// read of a slot past its new end into SIGBUS, a crash of this process by the peer's hand.
SameHostLink::Channel* SameHostLink::adopt(int sock, int memfd, int tx_efd, int rx_efd, bool we_connected,
                                           std::vector<Gid> peer, uint32_t peer_slot) {
  void* m = MAP_FAILED;
  if (shm::sealed_at_size(memfd, sizeof(shm::Area)))
    m = mmap(nullptr, sizeof(shm::Area), PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  close(memfd);
  if (m == MAP_FAILED) {
    refused_.fetch_add(1, std::memory_order_relaxed);  // counted before the peer sees the hang-up
    close_all({sock, tx_efd, rx_efd});
    return nullptr;
  }
  auto* area = static_cast<shm::Area*>(m);
  if (area->magic != shm::kMagic || area->slots != shm::kSlots || area->slot_bytes != sizeof(shm::Slot)) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    munmap(m, sizeof(shm::Area));
    close_all({sock, tx_efd, rx_efd});
    return nullptr;
  }
  populate_slots(area);
  auto c = std::make_unique<Channel>();
  c->peer = std::move(peer);
  c->peer_slot = peer_slot;
  c->area = area;
  c->tx = &area->ring[we_connected ? 0 : 1];
  c->rx = &area->ring[we_connected ? 1 : 0];
  c->sock = sock;
  c->tx_efd = tx_efd;
  c->rx_efd = rx_efd;
  offer_placed(*c, sock);
  epoll_event ev{};
  ev.events = EPOLLIN;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, rx_efd, &ev);
  Channel* raw = c.get();
  {
    std::lock_guard g(mu_);
    all_.push_back(std::move(c));
    gen_.fetch_add(1, std::memory_order_release);
  }
  poke();  // the watcher watches the new socket from now on
  return raw;
}

// What a channel held, once nobody reads it: under mu_ on the watcher's thread (which polls
// none of it meanwhile), or in the destructor.
void SameHostLink::release(Channel& c) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.rx_efd, nullptr);  // a forked child may hold it open
  munmap(c.area, sizeof(shm::Area));
  unmap_imports(c);
  close_all({c.sock, c.tx_efd, c.rx_efd});
}

// The watcher looks at its sockets and queues again.
void SameHostLink::poke() {
  uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof one);
}

void SameHostLink::watch() {
  std::vector<pollfd> p;
  std::vector<Channel*> watched;
  std::vector<ShmPeer> start;
  while (!stopping_.load()) {
    watched.clear();
    {
      std::lock_guard g(mu_);
      // Channels the engine side let go (dead, and read to the end): nobody else holds them,
      // and this thread polls none of them now.
      std::erase_if(all_, [this](const std::unique_ptr<Channel>& c) {
        if (c->retired) release(*c);
        return c->retired;
      });
      for (auto& c : all_)
        if (!c->dead.load()) watched.push_back(c.get());
      start.swap(to_dial_);
    }
    for (const ShmPeer& g : start) dial(g);
    start.clear();
    p.assign(1, pollfd{stop_fd_, POLLIN, 0});
    for (int fd : listen_fds_) p.push_back({fd, POLLIN, 0});
    for (const Dial& d : dials_) p.push_back({d.sock, POLLIN, 0});
    for (Channel* c : watched) p.push_back({c->sock, POLLIN, 0});
    int timeout = -1;  // until the first answer is due
    for (const Dial& d : dials_) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(d.deadline - std::chrono::steady_clock::now());
      if (timeout < 0 || left.count() < timeout) timeout = int(std::max<int64_t>(left.count(), 0));
    }
    if (poll(p.data(), p.size(), timeout) < 0) continue;
    uint64_t v;
    (void)!read(stop_fd_, &v, sizeof v);
    for (size_t i = 1; i <= listen_fds_.size(); ++i)
      if (p[i].revents) accept_one();
    const size_t at = 1 + listen_fds_.size(), n = dials_.size();
    const auto now = std::chrono::steady_clock::now();
    for (size_t i = 0; i < n; ++i) {
      if (p[at + i].revents)
        answered(dials_[i]);
      else if (now >= dials_[i].deadline)  // a stopped peer: UDP, asked again later
        dialed(dials_[i], false);
    }
    std::erase_if(dials_, [](const Dial& d) { return d.sock < 0; });
    for (size_t i = 0; i < watched.size(); ++i)
      if (p[at + n + i].revents) {  // the peer hung up (or spoke out of turn)
        watched[i]->dead.store(true);
        gen_.fetch_add(1, std::memory_order_release);
        uint64_t one = 1;  // an engine asleep reads the rest of its ring and lets it go
        (void)!write(watched[i]->rx_efd, &one, sizeof one);
      }
  }
}

// ---------------------------------------------------------------- engine side

void SameHostLink::refresh() {
  if (gen_.load(std::memory_order_acquire) == seen_gen_) return;
  std::lock_guard g(mu_);
  seen_gen_ = gen_.load(std::memory_order_acquire);
  for (const auto& [dst, ok] : dial_ends_) {
    auto it = asked_.find(dst);
    if (it == asked_.end()) continue;
    if (ok)
      asked_.erase(it);
    else
      it->second.dialing = false;
  }
  dial_ends_.clear();
  live_.clear();
  const bool had_channels = wire_in_skips_;
  bool retired = false;
  for (auto& c : all_) {
    if (c->retired) continue;
    // A peer that hung up may have sent its last packets just before (an unreliable QP's last
    // SEND completes when it is sent): a dead channel is read until its ring is empty, and
    // then let go (the watcher closes and unmaps it).
    if (c->dead.load() && c->rx->ready() <= 0) {
      drop_backlog(*c);
      c->retired = retired = true;
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
  if (retired) poke();
}

ShmPeer SameHostLink::peer_of(const Gid& dst, uint32_t dest_qpn) const {
  // A shared device's peers on this host are shared too, as every device off loopback is by
  // default; a peer that is not listens under no such slot and stays on UDP.
  return {dst, slot_ ? steering::slot_of_qpn(dest_qpn) : 0};
}

// The newest channel first: a slot is given again once its process leaves, and the channel
// of its next holder may come before the watcher has seen the last one's hang up.
SameHostLink::Channel* SameHostLink::find(const ShmPeer& dst) const {
  for (auto it = live_.rbegin(); it != live_.rend(); ++it) {
    Channel* c = *it;
    if (!c->dead.load(std::memory_order_relaxed) && c->peer_slot == dst.slot)
      for (const Gid& g : c->peer)
        if (g == dst.addr) return c;
  }
  return nullptr;
}

// Not refresh() itself: a send() holds channels it touched until it returns.
SameHostLink::Channel* SameHostLink::route(const ShmPeer& dst, uint64_t now) {
  if (wire::is_multicast(dst.addr)) return nullptr;  // a group: each member, over the wire link
  if (Channel* c = find(dst)) return c;
  if (listen_fds_.empty()) return nullptr;  // not in the registry ourselves: shared memory is off
  if (slot_ && dst.slot == 0) return nullptr;  // QP1, the host NIC daemon's
  for (const Gid& g : own_)
    if (g == dst.addr && dst.slot == slot_) return nullptr;  // ourselves: the wire link loops back
  auto it = asked_.find(dst);
  if (it != asked_.end() && (it->second.dialing || now < it->second.again_at)) return nullptr;
  // The handshake is the watcher's: the peer may be slow or stopped, and the engine lock is
  // not held while it answers. Until a channel exists, dst keeps UDP.
  asked_[dst] = {now + kRetryNs, true};
  {
    std::lock_guard g(mu_);
    to_dial_.push_back(dst);
    dialing_.push_back(dst);
  }
  poke();
  return nullptr;
}

// A full ring keeps the packet in the channel's backlog, in order, as a NIC's send queue
// waits for its link; only a backlog beyond its bound drops (counted).
bool SameHostLink::push(Channel& c, const wire::PacketBuf& p) {
  if (p.ref && p.ref_len >= shm::kMinPlaced) {
    if (int r = push_placed(c, p); r >= 0) return r;
  }
  close_run();  // before anything after it
  if (c.backlog.empty()) {
    // A payload of a whole entry or near it goes into the slot's payload entry, where the
    // receiver can take it together with its neighbours' (shm_split.cpp).
    const bool split = shm::goes_apart(p) && p.ref_len >= shm::kMinSplit && p.ref_len <= shm::kPayloadBytes;
    if (split ? c.tx->push_split(p, c.tx_tail, c.tx_head_seen) : c.tx->push(p, c.tx_tail, c.tx_head_seen)) {
      st_.tx_split += split;
      return true;
    }
  }
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
      if (!c->tx->push(c->backlog.front_bytes(), e.flags, e.flow, c->tx_tail, c->tx_head_seen)) break;
    }
    if (!n) continue;
    backlogged_ -= n;
    wake_peer(*c);
  }
}

// Asked only when a transport timer expires: the peer's head is not read on every pass.
uint64_t SameHostLink::held_moved_at(const Gid& dst, uint32_t dest_qpn, uint64_t now) {
  Channel* c = find(peer_of(dst, dest_qpn));
  if (!c) return 0;
  // Its answer may wait in our own ring, which the next passes read (64 packets at a time).
  if (c->rx->ready() > 0) return now;
  const uint32_t head = c->tx->head.load(std::memory_order_acquire);
  if (head == c->tx_tail && c->backlog.empty()) return 0;  // the peer has read them all
  if (head != c->head_checked) {
    c->head_checked = head;
    c->moved_at = now;
  }
  return c->moved_at;
}

void SameHostLink::wake_peer(Channel& c) {
  if (c.tx->consumer_needs_wake()) {
    uint64_t one = 1;
    (void)!write(c.tx_efd, &one, sizeof one);
  }
}

void SameHostLink::send(std::span<wire::PacketBuf* const> pkts, uint64_t now) {
  refresh();
  drain_backlogs();
  if (shared_regions().generation() != regions_gen_) regions_gen_ = shared_regions().snapshot(regions_);
  rest_.clear();
  touched_.clear();
  for (wire::PacketBuf* p : pkts) {
    Channel* c = route(peer_of(p->flow.dst, wire::bth_dest_qp(p->data)), now);
    if (!c) {
      close_run();  // before anything after it
      shm::complete_icrc(*p);  // the channel it was built for is gone
      rest_.push_back(p);
      continue;
    }
    if (pcap_) {  // the capture shows the packet a NIC would put on a wire
      p->materialize();
      shm::complete_icrc(*p);
    }
    if (!push(*c, *p)) {
      ++st_.tx_full_drops;  // lost as on a congested wire: the transport recovers
      continue;
    }
    ++st_.tx_packets;
    if (pcap_) pcap_->write(p->flow, {p->data, p->len}, now);
    if (std::find(touched_.begin(), touched_.end(), c) == touched_.end()) touched_.push_back(c);
  }
  close_run();
  for (Channel* c : touched_) wake_peer(*c);
  if (!rest_.empty()) wire_.send(rest_, now);
}

int SameHostLink::poll_rings(PacketSink& sink, uint64_t now, int max) {
  int n = 0;
  if (now >= sweep_at_) unmap_idle_imports(now);
  // Each pass starts one channel further on: a peer that always has a pass's worth waiting
  // cannot keep the others' packets unread (and their senders timing out).
  const size_t k = live_.size(), first = k ? first_ring_++ % k : 0;
  for (size_t j = 0; j < k; ++j) {
    Channel* c = live_[(first + j) % k];
    if (c->placed_again_at && now >= c->placed_again_at && c->peer_pid) {  // a refusal's pause is over
      c->placed_again_at = 0;
      c->rx->takes_placed.store(shm::kTakesAll, std::memory_order_relaxed);
    }
    int ready = 0;
    while (n < max && (ready = c->rx->ready()) > 0) {
      uint32_t flags = 0;
      const shm::Slot* s = c->rx->front(rx_buf_, flags);
      if (!s) {
        c->rx->pop();
        ++st_.rx_malformed;
        continue;
      }
      wire::Ipv4Fields sent;  // what our sender writes
      sent.icrc_absent = rx_buf_.icrc_skipped;
      if (flags & shm::kSlotSplit) {
        const uint32_t delivered = take_split(*c, *s, flags, sink, now, sent);
        st_.rx_packets += delivered;
        n += std::max(delivered, 1u);
        continue;
      }
      if (flags & shm::kSlotPlaced) {
        const uint32_t slot_len = rx_buf_.len;  // a capture makes rx_buf_ the whole packet
        const uint32_t delivered = deliver_placed(*c, *s, sink, now, sent);
        c->rx->expire_front(slot_len);
        c->rx->pop();
        st_.rx_packets += delivered;
        n += std::max(delivered, 1u);  // a run counts as its packets against the pass's batch
        continue;
      }
      // Delivered from the slot itself; a capture needs a copy it can complete the ICRC of.
      const uint8_t* bytes = s->data;
      if (pcap_) bytes = static_cast<const uint8_t*>(std::memcpy(rx_buf_.data, s->data, rx_buf_.len));
      std::span<const uint8_t> pkt(bytes, rx_buf_.len);
      wire::Ipv4Fields ip = sink.deliver(pkt, rx_buf_.flow, now, sent);
      c->rx->expire_front(rx_buf_.len);
      c->rx->pop();
      if (pcap_) {
        shm::complete_icrc(rx_buf_);
        pcap_->write(rx_buf_.flow, pkt, now, ip);
      }
      ++st_.rx_packets;
      ++n;
    }
    if (ready < 0) {  // a slot no correct peer writes: stop listening to it
      c->dead.store(true);
      gen_.fetch_add(1, std::memory_order_release);
    } else if (ready == 0 && c->dead.load(std::memory_order_relaxed)) {
      gen_.fetch_add(1, std::memory_order_release);  // read to its end: refresh() lets it go
    }
  }
  return n;
}

int SameHostLink::receive(PacketSink& sink, uint64_t now, int max, bool wire) {
  refresh();
  drain_backlogs();
  int n = poll_rings(sink, now, std::min(max, kRingBatch));
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

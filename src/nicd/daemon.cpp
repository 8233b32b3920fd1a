#include "nicd/daemon.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>

#include "cm/demux.hpp"
#include "cm/mad.hpp"
#include "link/host_nic_proto.hpp"
#include "link/iface.hpp"
#include "link/udp_sockets.hpp"
#include "wire/bytes.hpp"
#include "wire/ip_udp.hpp"
#include "wire/opcode.hpp"

namespace uroce::nicd {

namespace {

using namespace link::nicproto;
using link::steering::kSlots;

// What an epoll event is about: the top byte says which kind of descriptor.
enum : uint64_t { kListen = 1, kClient = 2, kSocket = 3, kChannel = 4 };
uint64_t tag(uint64_t kind, uint64_t v) { return kind << 56 | v; }
uint64_t socket_tag(size_t dev, size_t gid, uint32_t slot) { return tag(kSocket, dev << 16 | gid << 8 | slot); }


// A datagram's sender: its address as a GID, and its UDP port.
std::pair<Gid, uint16_t> source_of(const sockaddr_storage& from) {
  Gid g;
  if (from.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(from);
    return {Gid::from_ipv4(ntohl(a.sin_addr.s_addr)), ntohs(a.sin_port)};
  }
  const auto& a = reinterpret_cast<const sockaddr_in6&>(from);
  std::memcpy(g.raw.data(), &a.sin6_addr, 16);
  return {g, ntohs(a.sin6_port)};
}

std::string str(const Gid& g) { return wire::is_v4(g) ? g.to_string() : "[" + g.to_string() + "]"; }

}  // namespace

uint64_t now_ms() {
  return uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now().time_since_epoch()).count());
}

Result<std::unique_ptr<Daemon>> Daemon::open() {
  std::unique_ptr<Daemon> d(new Daemon);
  d->listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (d->listen_fd_ < 0) return make_error(errno, std::string("uroced: socket: ") + std::strerror(errno));
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, kName, sizeof kName - 1);
  if (bind(d->listen_fd_, reinterpret_cast<sockaddr*>(&a), socklen_t(offsetof(sockaddr_un, sun_path) + sizeof kName)) != 0)
    return make_error(errno, std::string("uroced: @") + kName + ": " + std::strerror(errno));
  if (listen(d->listen_fd_, 64) != 0) return make_error(errno, std::string("uroced: listen: ") + std::strerror(errno));
  d->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (d->epoll_fd_ < 0) return make_error(errno, std::string("uroced: epoll: ") + std::strerror(errno));
  epoll_event ev{EPOLLIN, {.u64 = tag(kListen, 0)}};
  epoll_ctl(d->epoll_fd_, EPOLL_CTL_ADD, d->listen_fd_, &ev);
  d->rules_path_ = rules_path();
  if (Status s = d->rules_.load(d->rules_path_); !s) return make_error(EINVAL, "uroced: " + s.error().message);
  return d;
}

Daemon::~Daemon() {
  for (auto& [fd, c] : clients_) {
    close(c->ctl);
    if (c->fwd >= 0) close(c->fwd);
  }
  for (auto& d : devices_) {
    for (auto& row : d->socks)
      for (int fd : row)
        if (fd >= 0) close(fd);
    if (d->port_fd >= 0) close(d->port_fd);
  }
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (listen_fd_ >= 0) close(listen_fd_);
}

int Daemon::run(uint64_t idle_ms) {
  uint64_t idle_since = now_ms();
  for (;;) {
    epoll_event evs[32];
    int timeout = status_timeout_ms();
    if (clients_.empty() && idle_ms) {  // 0: a service that stays
      uint64_t t = now_ms();
      if (t - idle_since >= idle_ms) return 0;
      timeout = int(idle_ms - (t - idle_since));
    }
    int n = epoll_wait(epoll_fd_, evs, 32, timeout);
    if (n < 0 && errno != EINTR) return 1;
    if (query_ && now_ms() >= query_->deadline_ms) finish_status();
    for (int i = 0; i < n; ++i) {
      uint64_t v = evs[i].data.u64, kind = v >> 56;
      if (kind == kListen) {
        accept_client();
      } else if (kind == kClient) {
        int fd = int(v & 0xffffffff);
        auto it = clients_.find(fd);
        if (it == clients_.end()) continue;
        if (evs[i].events & EPOLLIN) on_request(*it->second);
        else drop_client(fd);
      } else if (kind == kChannel) {
        auto it = clients_.find(int(v & 0xffffffff));
        if (it != clients_.end()) on_status_answer(*it->second);
      } else {
        size_t dev = (v >> 16) & 0xff, gid = (v >> 8) & 0xff;
        if (dev < devices_.size()) on_datagrams(*devices_[dev], gid, uint32_t(v & 0xff));
      }
    }
    if (clients_.empty() && n > 0) idle_since = now_ms();
  }
}

void Daemon::accept_client() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    auto c = std::make_unique<Client>();
    c->ctl = fd;
    socklen_t len = sizeof c->cred;
    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &len);
    epoll_event ev{EPOLLIN | EPOLLRDHUP, {.u64 = tag(kClient, uint32_t(fd))}};
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    clients_[fd] = std::move(c);
  }
}

void Daemon::reply(Client& c, int err, const std::string& text, uint32_t slot, const Device* dev,
                   const std::vector<int>& fds) {
  Reply r;
  r.err = err;
  r.slot = slot;
  std::snprintf(r.text, sizeof r.text, "%s", text.c_str());
  if (dev) {
    r.forwarded = c.forwarded;
    r.port_page = !c.forwarded && dev->port ? uint32_t(sizeof(transport::SharedPort)) : 0;
    r.ngids = uint32_t(dev->gids.size());
    for (size_t i = 0; i < dev->gids.size(); ++i) std::memcpy(r.gids[i], dev->gids[i].raw.data(), 16);
  }
  iovec iov{&r, sizeof r};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  std::vector<char> ctrl(CMSG_SPACE(sizeof(int) * fds.size()));
  if (!fds.empty()) {
    m.msg_control = ctrl.data();
    m.msg_controllen = ctrl.size();
    cmsghdr* cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(cm), fds.data(), sizeof(int) * fds.size());
  }
  (void)sendmsg(c.ctl, &m, MSG_NOSIGNAL);
}

void Daemon::on_request(Client& c) {
  Request q;
  ssize_t n = recv(c.ctl, &q, sizeof q, 0);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return drop_client(c.ctl);
  if (n != ssize_t(sizeof q)) return reply(c, EPROTO, "uroced: a request of the wrong size");
  switch (q.op) {
    case Op::Attach: {
      if (c.dev) return reply(c, EALREADY, "uroced: this connection holds a device already");
      // Sockets of a steering group are handed to processes of the daemon's user (who could
      // act as it anyway) and of root only: a socket of the group could take the group's
      // steering. Another user's process gets its slot's packets from us, on its channel.
      const bool forwarded = c.cred.uid != geteuid() && c.cred.uid != 0;
      Gid addr;
      std::memcpy(addr.raw.data(), q.addr, 16);
      auto dev = device_for(addr);
      if (!dev) return reply(c, dev.error().code, dev.error().message);
      Device& d = **dev;
      uint32_t slot = 1;
      while (slot < kSlots && d.owner[slot]) ++slot;
      if (slot == kSlots) return reply(c, EUSERS, "the device at " + str(addr) + " has " + std::to_string(kSlots - 1) + " processes already");
      int pair[2];
      if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0)
        return reply(c, errno, std::string("uroced: socketpair: ") + std::strerror(errno));
      int buf = 4 << 20;  // room for bursts of packets one way, a status of thousands of QPs the other
      setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
      setsockopt(pair[1], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
      epoll_event ev{EPOLLIN, {.u64 = tag(kChannel, uint32_t(c.ctl))}};  // the process's status answers
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, pair[0], &ev);
      std::vector<int> fds = {pair[1]};
      on_datagrams(d, SIZE_MAX, slot);  // what a former owner's peers left there is not the new one's
      if (!forwarded && d.port) {  // a fair start on the port: the former owner's history is not its
        d.port->proc[slot].vbytes.store(0);
        d.port->proc[slot].waiting_until.store(0);
        fds.push_back(d.port_fd);
      }
      if (forwarded) {
        int off = 0;  // one datagram per read: a former owner may have turned coalescing on
        for (auto& row : d.socks) setsockopt(row[slot], SOL_UDP, UDP_GRO, &off, sizeof off);
      } else {
        for (auto& row : d.socks) fds.push_back(row[slot]);
        watch_slot(d, slot, false);  // from now on the process reads it
      }
      d.owner[slot] = &c;
      c.dev = &d;
      c.slot = slot;
      c.fwd = pair[0];
      c.forwarded = forwarded;
      ++ctr_.attached;
      reply(c, 0, "", slot, &d, fds);
      close(pair[1]);
      return;
    }
    case Op::Listen: {
      if (!c.dev) return reply(c, EINVAL, "uroced: listen before attach");
      auto [it, fresh] = c.dev->listeners.emplace(q.arg, &c);
      if (!fresh && it->second != &c) {
        char sid[32];
        std::snprintf(sid, sizeof sid, "0x%016llx", static_cast<unsigned long long>(q.arg));
        return reply(c, EADDRINUSE, std::string("service ID ") + sid + " is listened on by pid " +
                                        std::to_string(it->second->cred.pid));
      }
      return reply(c, 0, "");
    }
    case Op::Unlisten:
      if (c.dev) {
        auto it = c.dev->listeners.find(q.arg);
        if (it != c.dev->listeners.end() && it->second == &c) c.dev->listeners.erase(it);
      }
      return reply(c, 0, "");
    case Op::Status:
      if (query_) return reply(c, EBUSY, "uroced: another status is being gathered; try again");
      return start_status(c);
    case Op::Rules:
      return on_rules(c, std::string(q.text, strnlen(q.text, sizeof q.text)));
    case Op::Reply:
      break;
  }
  reply(c, EINVAL, "uroced: unknown request");
}

void Daemon::drop_client(int fd) {
  auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  Client& c = *it->second;
  if (Device* d = c.dev) {
    for (auto l = d->listeners.begin(); l != d->listeners.end();)
      l = l->second == &c ? d->listeners.erase(l) : std::next(l);
    d->owner[c.slot] = nullptr;
    if (!c.forwarded) watch_slot(*d, c.slot, true);  // read and dropped until the slot is given again
  }
  if (query_) {
    query_->waiting.erase(&c);
    query_->answers.erase(&c);
    if (query_->asker == &c) query_.reset();
    else if (query_->waiting.empty()) finish_status();
  }
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(c.ctl);
  if (c.fwd >= 0) close(c.fwd);
  clients_.erase(it);
}

// The device of an address: made on first use, with a steering group for each of its GIDs.
// A device no process uses is made again when its interface's addresses changed since (an
// IPv6 address that came after the daemon, as a link-local one does after its duplicate
// address detection): rxe follows its netdev's addresses the same way.
Result<Daemon::Device*> Daemon::device_for(const Gid& asked) {
  link::Interface itf = link::find_interface(asked);
  if (itf.error) return link::unreadable_interfaces(itf.error);
  if (itf.name.empty()) return make_error(EADDRNOTAVAIL, "no interface of this host has the address " + str(asked));
  // One device per interface: a process naming an IPv6 address of an interface with an IPv4
  // one (rdma_cm bound to the link-local address) shares the interface's device, whose GID
  // table holds every address, instead of a second device on the same addresses.
  const Gid addr = !wire::is_v4(asked) && !itf.loopback && itf.ipv4 ? Gid::from_ipv4(itf.ipv4) : asked;
  std::vector<Gid> gids;
  if (wire::is_v4(addr) && !itf.loopback) gids = itf.ipv6;  // rxe's order: IPv6 first, link-local first
  if (gids.size() >= size_t(kMaxGids)) gids.resize(kMaxGids - 1);
  gids.push_back(addr);
  for (auto& d : devices_) {
    if (d->addr != addr) continue;
    const bool used = std::any_of(d->owner.begin(), d->owner.end(), [](const Client* c) { return c; });
    if (used || d->wanted == gids) return d.get();
    for (uint32_t s = 0; s < kSlots; ++s) watch_slot(*d, s, false);
    close_sockets(*d);
    if (Status st = open_sockets(*d, itf, gids); !st) return st.error();
    return d.get();
  }
  if (devices_.size() >= 255) return make_error(ENOSPC, "uroced: too many devices");
  auto d = std::make_unique<Device>();
  d->addr = addr;
  d->index = devices_.size();
  if (Status st = open_sockets(*d, itf, gids); !st) return st.error();
  make_port(*d);
  devices_.push_back(std::move(d));
  return devices_.back().get();
}

// The device's port page; without one (no memfd) each process keeps a port of its own.
void Daemon::make_port(Device& d) {
  const int fd = memfd_create("uroce-port", MFD_CLOEXEC);
  if (fd < 0) return;
  void* m = MAP_FAILED;
  if (ftruncate(fd, sizeof(transport::SharedPort)) == 0)
    m = mmap(nullptr, sizeof(transport::SharedPort), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    close(fd);
    return;
  }
  d.port_fd = fd;
  d.port = new (m) transport::SharedPort;
  rules_.publish_classes(*d.port);
}

void Daemon::close_sockets(Device& d) {
  for (auto& row : d.socks)
    for (int fd : row)
      if (fd >= 0) close(fd);
  d.socks.clear();
  d.gids.clear();
}

// A steering group for each GID that binds; an IPv6 address that does not is left out.
Status Daemon::open_sockets(Device& d, const link::Interface& itf, const std::vector<Gid>& gids) {
  d.wanted = gids;
  d.gids = gids;
  const Gid& addr = d.addr;
  const auto plain = link::steering::reuseport_program();
  for (size_t g = 0; g < d.gids.size();) {
    const Gid& gid = d.gids[g];
    std::array<int, kSlots> row;
    row.fill(-1);
    int err = 0;
    for (uint32_t s = 0; s < kSlots && err == 0; ++s) {
      row[s] = wire::is_v4(gid) ? link::make_socket(wire::v4_of(gid), wire::kRoceV2Port, &err, true)
                                : link::make_socket6(gid, link::is_link_local(gid) ? itf.index : 0,
                                                     wire::kRoceV2Port, &err, true);
    }
    // The plain program while steers() probes the group (a rule may send its probe to slot 0);
    // the flow table's after it.
    sock_fprog fp{uint16_t(plain.size()), const_cast<sock_filter*>(plain.data())};
    if (err == 0 && setsockopt(row[0], SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &fp, sizeof fp) != 0) err = errno;
    // Not locked (SO_LOCK_FILTER): the daemon replaces the program when the rules change. The
    // processes given these sockets are of the daemon's user or root, who could act as it anyway.
    bool stale = err == 0 && !steers(gid, itf.index, row);
    if (err != 0 || stale) {
      for (int fd : row)
        if (fd >= 0) close(fd);
      if (gid != addr && err != EMFILE && err != ENFILE) {  // an IPv6 address of the interface: left out
        d.gids.erase(d.gids.begin() + long(g));
        continue;
      }
      close_sockets(d);
      if (stale)
        return make_error(EADDRINUSE, "the sockets of an earlier host NIC daemon still hold " + str(gid) +
                                          ":4791 (its processes fail and exit; try again then)");
      return make_error(err, "cannot bind " + str(gid) + ":4791: " + std::strerror(err) +
                                 (err == EADDRINUSE ? " (another program holds it: a uroce process of an older version, "
                                                      "or the kernel's rxe)"
                                                    : ""));
    }
    const auto prog = rules_.steering_program(wire::is_v4(gid));
    sock_fprog rp{uint16_t(prog.size()), const_cast<sock_filter*>(prog.data())};
    if (setsockopt(row[0], SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &rp, sizeof rp) != 0) {
      const int e = errno;
      for (int fd : row) close(fd);
      close_sockets(d);
      return make_error(e, "uroced: cannot attach the flow table's steering to " + str(gid) + ": " + std::strerror(e));
    }
    d.socks.push_back(row);
    ++g;
  }
  for (uint32_t s = 0; s < kSlots; ++s) watch_slot(d, s, true);
  return {};
}

// Our sockets are the whole group only if a datagram to the last slot's QPN reaches the last
// socket: sockets of a daemon that died (still held by its processes) would come first.
bool Daemon::steers(const Gid& gid, uint32_t ifindex, const std::array<int, kSlots>& row) {
  const bool v4 = wire::is_v4(gid);
  int fd = socket(v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  uint8_t probe[12] = {};
  const uint32_t qpn = (kSlots - 1) << link::steering::kQpnLocalBits | 0x3ffff;
  wire::write_be32(probe + 4, qpn);
  sockaddr_storage to{};
  socklen_t len;
  if (v4) {
    auto& a = reinterpret_cast<sockaddr_in&>(to);
    a.sin_family = AF_INET;
    a.sin_port = htons(wire::kRoceV2Port);
    a.sin_addr.s_addr = htonl(wire::v4_of(gid));
    len = sizeof a;
  } else {
    auto& a = reinterpret_cast<sockaddr_in6&>(to);
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(wire::kRoceV2Port);
    std::memcpy(&a.sin6_addr, gid.raw.data(), 16);
    a.sin6_scope_id = link::is_link_local(gid) ? ifindex : 0;
    len = sizeof a;
  }
  bool ok = sendto(fd, probe, sizeof probe, 0, reinterpret_cast<sockaddr*>(&to), len) == ssize_t(sizeof probe);
  close(fd);
  pollfd p{row[kSlots - 1], POLLIN, 0};
  ok = ok && poll(&p, 1, 500) == 1;
  uint8_t got[sizeof probe];
  return ok && recv(row[kSlots - 1], got, sizeof got, MSG_DONTWAIT) == ssize_t(sizeof got) &&
         std::memcmp(got, probe, sizeof got) == 0;
}

void Daemon::watch_slot(Device& d, uint32_t slot, bool on) {
  for (size_t g = 0; g < d.socks.size(); ++g) {
    epoll_event ev{EPOLLIN, {.u64 = socket_tag(d.index, g, slot)}};
    epoll_ctl(epoll_fd_, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, d.socks[g][slot], &ev);
  }
}

// Reads what waits on a slot's socket (of GID gid, or of every GID for SIZE_MAX): slot 0's
// packets go through the flow table (MADs, and what a rule may match); a slot's whose process
// is another user's are passed on; anything else is dropped.
void Daemon::on_datagrams(Device& d, size_t gid, uint32_t slot) {
  for (size_t g = 0; g < d.socks.size(); ++g) {
    if (gid != SIZE_MAX && g != gid) continue;
    for (int k = 0; k < 64; ++k) {  // bounded: the epoll wakes us again if more is left
      uint8_t buf[9216];  // a jumbo frame's datagram
      sockaddr_storage from{};
      alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int)) * 2];
      iovec iov{buf, sizeof buf};
      msghdr m{};
      m.msg_name = &from;
      m.msg_namelen = sizeof from;
      m.msg_iov = &iov;
      m.msg_iovlen = 1;
      m.msg_control = ctrl;
      m.msg_controllen = sizeof ctrl;
      ssize_t n = recvmsg(d.socks[g][slot], &m, MSG_DONTWAIT);
      if (n < 0) break;
      uint8_t tos = 0;
      for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
        if ((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) ||
            (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS))
          tos = *CMSG_DATA(c);
      Client* owner = d.owner[slot];
      if (m.msg_flags & MSG_TRUNC) ++ctr_.stray_dropped;
      else if (slot == 0) on_steered(d, g, {buf, size_t(n)}, from, tos);
      else if (owner && owner->forwarded) pass_on(*owner, d, g, {buf, size_t(n)}, from, tos);
      else ++ctr_.stray_dropped;
    }
  }
}

void Daemon::on_steered(Device& d, size_t gid, std::span<const uint8_t> pkt, const sockaddr_storage& from,
                        uint8_t tos) {
  if (pkt.size() < size_t(wire::kBthLen) + wire::kIcrcLen) {  // no rule reads it, no process wants it
    ++ctr_.stray_dropped;
    return;
  }
  const auto [src, sport] = source_of(from);
  if (Rule* r = rules_.first_match(pkt, src, sport, tos)) {
    ++ctr_.ruled;
    ++r->packets;
    r->bytes += pkt.size();
    const uint64_t now_ns = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                         std::chrono::steady_clock::now().time_since_epoch()).count());
    const bool through = r->action == Rule::Action::Count || r->action == Rule::Action::Mirror ||
                         (r->action == Rule::Action::Police && r->conforms(pkt.size(), now_ns));
    if (!through) {
      ++r->dropped;
      return;
    }
    if (r->action == Rule::Action::Mirror) {
      auto& w = mirrors_[r->mirror];
      if (!w) {
        w = std::make_unique<link::PcapWriter>();
        (void)w->open(r->mirror);  // a path it cannot write: mirrored nowhere, still counted
      }
      const auto wall = std::chrono::system_clock::now().time_since_epoch();  // a capture's time is the date
      if (w->is_open())
        w->write({src, d.gids[gid], sport, wire::kRoceV2Port}, pkt,
                 uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(wall).count()));
    }
  }
  const uint32_t slot = link::steering::slot_of_qpn(wire::read_be32(pkt.data() + 4));
  if (slot == 0) return forward_mad(d, gid, pkt, from, tos);
  if (Client* c = d.owner[slot]; c && pass_on(*c, d, gid, pkt, from, tos)) return;
  ++ctr_.stray_dropped;  // no process holds its slot, or its channel is full
}

// A UD SEND_ONLY to QP1 carrying a CM MAD goes to the process it names; anything else on slot
// 0 is dropped here, as a NIC drops a packet for a QP that does not exist.
void Daemon::forward_mad(Device& d, size_t gid, std::span<const uint8_t> pkt, const sockaddr_storage& from,
                         uint8_t tos) {
  using namespace wire;
  if (pkt.size() < size_t(kBthLen + kDethLen) + cm::kMadBytes + kIcrcLen || pkt[0] != uint8_t(Opcode::UD_SEND_ONLY) ||
      (read_be32(pkt.data() + 4) & kQpnMask) != kGsiQpn) {
    ++ctr_.mads_dropped;
    return;
  }
  auto who = cm::recipient(pkt.subspan(kBthLen + kDethLen, cm::kMadBytes));
  Client* c = nullptr;
  if (who && who->by_service) {
    auto it = d.listeners.find(who->service_id);
    if (it != d.listeners.end()) c = it->second;
  } else if (who) {
    c = d.owner[link::steering::slot_of_comm_id(who->comm_id)];
  }
  if (!c) {
    ++ctr_.mads_dropped;
    return;
  }
  if (pass_on(*c, d, gid, pkt, from, tos)) ++ctr_.mads_forwarded;
  else ++ctr_.mads_dropped;  // its channel is full: as a full receive queue, the peer retries
}

// One datagram to a process over its forwarding channel; false if the channel is full.
bool Daemon::pass_on(Client& c, const Device& d, size_t gid, std::span<const uint8_t> pkt,
                     const sockaddr_storage& from, uint8_t tos) {
  Forwarded h{};
  const auto [src, sport] = source_of(from);
  std::memcpy(h.src, src.raw.data(), 16);
  h.src_port = sport;
  std::memcpy(h.dst, d.gids[gid].raw.data(), 16);
  h.tos = tos;
  iovec iov[2] = {{&h, sizeof h}, {const_cast<uint8_t*>(pkt.data()), pkt.size()}};
  msghdr m{};
  m.msg_iov = iov;
  m.msg_iovlen = 2;
  return sendmsg(c.fwd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) > 0;
}

}  // namespace uroce::nicd

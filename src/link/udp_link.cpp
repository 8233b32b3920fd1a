#include "link/udp_link.hpp"

#include <arpa/inet.h>
#include <unistd.h>

#include <ifaddrs.h>
#include <net/if.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>

#include <linux/filter.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <netinet/udp.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "link/host_nic_proto.hpp"
#include "link/iface.hpp"
#include "link/steering.hpp"
#include "link/udp_sockets.hpp"
#include "wire/bytes.hpp"
#include "wire/ip_udp.hpp"

namespace uroce::link {

namespace {

std::string ip_str(uint32_t ip) {
  in_addr a{htonl(ip)};
  return inet_ntoa(a);
}

}  // namespace

namespace {

// Classic BPF on the IP header (AF_PACKET, SOCK_DGRAM): IPv4/UDP to dst_ip, port 4791,
// unfragmented; on a shared device (slot > 0) only datagrams to a QPN of that slot.
int open_raw(uint32_t dst_ip, uint32_t slot, int* err) {
  int fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_IP));
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  const uint8_t tail = slot ? 4 : 0;  // the slot test's instructions, before the two returns
  std::vector<sock_filter> code = {
      BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 9), BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 17, 0, uint8_t(8 + tail)),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 16), BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, dst_ip, 0, uint8_t(6 + tail)),
      BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 6), BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x1fff, uint8_t(4 + tail), 0),
      BPF_STMT(BPF_LDX | BPF_B | BPF_MSH, 0), BPF_STMT(BPF_LD | BPF_H | BPF_IND, 2),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, wire::kRoceV2Port, 0, uint8_t(1 + tail)),
  };
  if (slot) {  // BTH bytes 4..7 (UDP header, then BTH 0..3): the destination QPN's slot
    code.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_IND, 12));
    code.push_back(BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xffffff));
    code.push_back(BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, steering::kQpnLocalBits));
    code.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, slot, 0, 1));
  }
  code.push_back(BPF_STMT(BPF_RET | BPF_K, 0xffff));
  code.push_back(BPF_STMT(BPF_RET | BPF_K, 0));
  sock_fprog prog{uint16_t(code.size()), code.data()};
  if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0) {
    *err = errno;
    close(fd);
    return -1;
  }
  int buf = 8 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  return fd;
}

uint16_t bound_port(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port)
                                  : ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
}

}  // namespace

// Receive sockets for the IPv6 addresses, and send sockets on the ports the IPv4 ones have (a
// QP's source port is the same whichever family its path takes). An address that cannot be
// bound (another device on this interface has it) is left out unless it was asked for; a
// process out of descriptors fails (a device without its IPv6 GIDs would be half built).
bool UdpLink::open_v6(const std::vector<Gid>& addrs, bool required, int* err) {
  for (const Gid& a : addrs) {
    int fd = make_socket6(a, is_link_local(a) ? ifindex_ : 0, wire::kRoceV2Port, err);
    if (fd >= 0) v6_.push_back({a, fd});
    else if (required || *err == EMFILE || *err == ENFILE) return false;
  }
  if (v6_.empty()) return !required;
  return open_tx6(required, err);
}

bool UdpLink::open_tx6(bool required, int* err) {
  for (int i = 0; i < kTxSockets; ++i) {
    tx6_fd_[i] = make_socket6(Gid{}, 0, tx_port_[i], err);
    if (tx6_fd_[i] < 0) {  // no IPv6 after all: nothing of it is left open
      for (auto& v : v6_) close(v.fd);
      v6_.clear();
      for (int& fd : tx6_fd_)
        if (fd >= 0) close(std::exchange(fd, -1));
      return !required && *err != EMFILE && *err != ENFILE;
    }
    tx_port_[i] = bound_port(tx6_fd_[i]);
  }
  return true;
}

Result<std::unique_ptr<UdpLink>> UdpLink::open(const Gid& addr, const std::string& pcap_path, Rx rx, bool gso) {
  std::unique_ptr<UdpLink> l(new UdpLink);
  int err = 0;
  const bool v6_only = !wire::is_v4(addr) && addr != Gid{};
  uint32_t ip = v6_only || addr == Gid{} ? 0 : wire::v4_of(addr);
  // An IPv6-only device has no IPv4 socket: its send ports come from its IPv6 sockets.
  if (ip) {
    l->rx_fd_ = make_socket(ip, wire::kRoceV2Port, &err);
    if (l->rx_fd_ < 0)
      return make_error(err, "cannot bind " + ip_str(ip) + ":4791: " + std::strerror(err));
  } else if (!v6_only) {
    for (uint32_t x = 1; x < 255 && l->rx_fd_ < 0; ++x) {
      ip = 0x7f000000 | x;
      l->rx_fd_ = make_socket(ip, wire::kRoceV2Port, &err);
      if (l->rx_fd_ < 0 && err != EADDRINUSE)  // out of descriptors: no other address does better
        return make_error(err, std::string("cannot open a UDP socket: ") + std::strerror(err));
    }
    if (l->rx_fd_ < 0) return make_error(EADDRINUSE, "no free 127.0.0.x:4791 on loopback");
  }
  l->ip_ = ip;
  Interface itf = find_interface(v6_only ? addr : Gid::from_ipv4(ip));
  if (itf.error) return unreadable_interfaces(itf.error);
  l->ip_mtu_ = itf.mtu;
  l->ifindex_ = itf.index;
  l->node_guid_ = link::node_guid(itf);
  for (int i = 0; ip && i < kTxSockets; ++i) {
    l->tx_fd_[i] = make_socket(ip, 0, &err);
    if (l->tx_fd_[i] < 0) return make_error(err, std::string("cannot open a UDP send socket: ") + std::strerror(err));
    l->tx_port_[i] = bound_port(l->tx_fd_[i]);
  }
  if (v6_only) {
    if (!l->open_v6({addr}, true, &err))
      return make_error(err, "cannot bind [" + addr.to_string() + "]:4791: " + std::strerror(err));
  } else if (!itf.loopback) {
    // Loopback's ::1 is not shared among devices: IPv6 there only when asked for (UROCE_ADDR=::1).
    if (!l->open_v6(itf.ipv6, false, &err))
      return make_error(err, std::string("cannot open an IPv6 socket: ") + std::strerror(err));
  }
  return l->finish(pcap_path, rx, gso, 0) ? Result<std::unique_ptr<UdpLink>>(std::move(l)) : l->error_;
}

// What both kinds of device do once their receive sockets are there: the capture, raw receive,
// segmentation offload and the epoll set.
bool UdpLink::finish(const std::string& pcap_path, Rx rx, bool gso, uint32_t slot) {
  int err = 0;
  auto fail = [&](int code, std::string what) {
    error_ = Error{code, std::move(what)};
    return false;
  };
  if (!pcap_path.empty()) {
    pcap_ = std::make_unique<PcapWriter>();
    if (!pcap_->open(pcap_path)) return fail(errno, "cannot write capture file " + pcap_path);
  }
  rx_buf_.resize(size_t(kRxBatch) * kRxBufBytes);
  // Raw receive sees the real IP ID (an exact ICRC check of any sender) but costs segmentation
  // and receive offload, and a second copy of every packet: only when asked for.
  if (ip_ && !fwd_only_ && rx == Rx::Raw) {
    raw_fd_ = open_raw(ip_, slot, &err);
    if (raw_fd_ < 0 && rx == Rx::Raw)
      return fail(err, std::string("raw receive (UROCE_RAW_RX=1) needs CAP_NET_RAW: ") + std::strerror(err));
  }
  if (!fwd_only_ && rx == Rx::Xdp) open_xdp(slot);
  gso_ = gso && raw_fd_ < 0;
  if (gso_) {
    int one = 1;  // receive a run of datagrams of one flow in one buffer
    if (rx_fd_ >= 0) setsockopt(rx_fd_, SOL_UDP, UDP_GRO, &one, sizeof one);
    for (const auto& v : v6_)
      if (v.fd >= 0) setsockopt(v.fd, SOL_UDP, UDP_GRO, &one, sizeof one);
  }
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return fail(errno, std::string("UDP link: epoll_create1: ") + std::strerror(errno));
  std::vector<int> fds;
  if (ip_ && !fwd_only_) fds.push_back(raw_fd_ >= 0 ? raw_fd_ : rx_fd_);
  if (xdp_) fds.push_back(xdp_->fd());
  for (const auto& v : v6_)
    if (v.fd >= 0) fds.push_back(v.fd);
  if (fwd_fd_ >= 0) fds.push_back(fwd_fd_);
  for (int fd : fds) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
  return true;
}

Result<std::unique_ptr<UdpLink>> UdpLink::open_shared(std::unique_ptr<HostNicLease> lease, const std::string& pcap_path,
                                                      Rx rx, bool gso) {
  std::unique_ptr<UdpLink> l(new UdpLink);
  std::vector<int> fds = lease->take_rx_fds();
  const std::vector<Gid>& gids = lease->gids();
  l->fwd_only_ = fds.empty();  // every packet comes from the daemon
  for (size_t i = 0; i < gids.size(); ++i) {
    const int fd = l->fwd_only_ ? -1 : fds[i];
    if (wire::is_v4(gids[i])) {
      l->ip_ = wire::v4_of(gids[i]);
      l->rx_fd_ = fd;
    } else {
      l->v6_.push_back({gids[i], fd});
    }
  }
  l->fwd_fd_ = lease->take_forward_fd();
  Interface itf = find_interface(gids.back());  // its MTU now: it may have changed since the daemon started
  if (itf.error) return unreadable_interfaces(itf.error);
  l->ip_mtu_ = itf.mtu;
  l->ifindex_ = itf.index;
  l->node_guid_ = link::node_guid(itf);
  int err = 0;
  for (int i = 0; l->ip_ && i < kTxSockets; ++i) {
    l->tx_fd_[i] = make_socket(l->ip_, 0, &err);
    if (l->tx_fd_[i] < 0) return make_error(err, std::string("cannot open a UDP send socket: ") + std::strerror(err));
    l->tx_port_[i] = bound_port(l->tx_fd_[i]);
  }
  if (!l->v6_.empty() && !l->open_tx6(true, &err))
    return make_error(err, std::string("cannot open an IPv6 socket: ") + std::strerror(err));
  const uint32_t slot = lease->slot();
  l->lease_ = std::move(lease);
  return l->finish(pcap_path, rx, gso, slot) ? Result<std::unique_ptr<UdpLink>>(std::move(l)) : l->error_;
}

UdpLink::~UdpLink() {
  if (rx_fd_ >= 0) close(rx_fd_);
  if (fwd_fd_ >= 0) close(fwd_fd_);
  if (raw_fd_ >= 0) close(raw_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  for (int fd : tx_fd_)
    if (fd >= 0) close(fd);
  for (int fd : tx6_fd_)
    if (fd >= 0) close(fd);
  for (const auto& v : v6_)
    if (v.fd >= 0) close(v.fd);
  for (const auto& g : groups_) close(g.fd);
}

std::vector<Gid> UdpLink::gids() const {
  std::vector<Gid> out;
  for (const auto& v : v6_) out.push_back(v.addr);
  if (ip_) out.push_back(Gid::from_ipv4(ip_));
  return out;
}

uint16_t UdpLink::src_port_for(uint32_t qpn) const {
  uint32_t h = qpn * 2654435761u;
  return tx_port_[(h >> 16) % kTxSockets];
}

int UdpLink::poll_v6(PacketSink& sink, uint64_t now, int max) {
  int total = 0;
  for (const V6Addr& v : v6_) total += poll_v6_fd(v.fd, v.addr, sink, now, max - total);
  return total;
}

// What arrived on one IPv6 socket, addressed to dst (its address, or its group's).
int UdpLink::poll_v6_fd(int fd, const Gid& dst, PacketSink& sink, uint64_t now, int max) {
  int total = 0;
  while (total < max) {
    mmsghdr msgs[kRxBatch];
    iovec iov[kRxBatch];
    sockaddr_in6 src[kRxBatch];
    alignas(cmsghdr) RxCtrl ctrl[kRxBatch];
    prepare_rx(msgs, iov, src, sizeof src[0], ctrl);
    int r = recvmmsg(fd, msgs, kRxBatch, MSG_DONTWAIT, nullptr);
    if (r <= 0) break;
    for (int k = 0; k < r; ++k) {
      wire::FlowAddr f;
      std::memcpy(f.src.raw.data(), &src[k].sin6_addr, 16);
      f.dst = dst;
      f.src_port = ntohs(src[k].sin6_port);
      const size_t len = msgs[k].msg_len;
      size_t seg = len;
      wire::Ipv4Fields seen;  // IPv6 hides nothing the ICRC covers; the ECN bits come aside
      for (cmsghdr* cm = CMSG_FIRSTHDR(&msgs[k].msg_hdr); cm; cm = CMSG_NXTHDR(&msgs[k].msg_hdr, cm)) {
        int v;
        std::memcpy(&v, CMSG_DATA(cm), sizeof v);
        if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_TCLASS) seen.tos = uint8_t(v);
        else if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO && v > 0) seg = size_t(v);
      }
      const uint8_t* base = static_cast<uint8_t*>(iov[k].iov_base);
      size_t off = 0;
      do {  // with UDP GRO one buffer may hold several datagrams of `seg` bytes each
        std::span<const uint8_t> pkt(base + off, std::min(seg, len - off));
        wire::Ipv4Fields ip = sink.deliver(pkt, f, now, seen);
        if (pcap_) pcap_->write(f, pkt, now, ip);
        ++total;
        off += seg;
      } while (off < len);
      wire::expire(static_cast<uint8_t*>(iov[k].iov_base), len);
    }
    if (r < kRxBatch) break;
  }
  return total;
}

// Points message k of a receive batch at buffer k of rx_buf_, with room for the sender's
// address in names[k] (an array of kRxBatch addresses of name_len bytes), if names is given,
// and for its control messages in ctrl[k], if ctrl is.
void UdpLink::prepare_rx(mmsghdr* msgs, iovec* iov, void* names, socklen_t name_len, RxCtrl* ctrl) {
  for (int k = 0; k < kRxBatch; ++k) {
    iov[k] = {rx_buf_.data() + size_t(k) * kRxBufBytes, kRxBufBytes};
    msgs[k] = {};
    msgs[k].msg_hdr.msg_iov = &iov[k];
    msgs[k].msg_hdr.msg_iovlen = 1;
    if (names) {
      msgs[k].msg_hdr.msg_name = static_cast<char*>(names) + size_t(k) * name_len;
      msgs[k].msg_hdr.msg_namelen = name_len;
    }
    if (ctrl) {
      msgs[k].msg_hdr.msg_control = ctrl[k];
      msgs[k].msg_hdr.msg_controllen = sizeof ctrl[k];
    }
  }
}

void UdpLink::drain_udp() {
  // In raw mode the same datagrams also reach the UDP socket, which only keeps the port ours.
  mmsghdr msgs[kRxBatch];
  iovec iov[kRxBatch];
  for (;;) {
    prepare_rx(msgs, iov, nullptr, 0);
    if (recvmmsg(rx_fd_, msgs, kRxBatch, MSG_DONTWAIT, nullptr) < kRxBatch) return;
  }
}

// The device's IPv4 frames by AF_XDP, if the process may and the interface can; else one line
// and the sockets.
void UdpLink::open_xdp(uint32_t slot) {
  XdpPort::Config c;
  c.ifindex = ifindex_;
  c.ip = ip_;
  c.slot = slot;
  c.any_slot = !lease_;
  c.ip_mtu = ip_mtu_;
  for (const V6Addr& v : v6_) c.v6.push_back(v.addr);
  auto port = XdpPort::open(c);
  if (!port) {
    std::fprintf(stderr, "uroce: AF_XDP is not available (%s): using UDP sockets\n", port.error().message.c_str());
    return;
  }
  xdp_ = std::move(*port);
}

int UdpLink::poll_xdp(PacketSink& sink, uint64_t now, int max) {
  return xdp_->poll(max, [&](const XdpPort::Frame& f) {
    wire::Ipv4Fields ip = sink.deliver(f.pkt, f.flow, now, f.ip);
    if (pcap_) pcap_->write(f.flow, f.pkt, now, ip);
  });
}

int UdpLink::poll_raw(PacketSink& sink, uint64_t now, int max) {
  drain_udp();
  int total = 0;
  uint8_t* buf = rx_buf_.data();
  while (total < max) {
    sockaddr_ll from{};
    socklen_t fl = sizeof from;
    ssize_t n = recvfrom(raw_fd_, buf, kRxBufBytes, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &fl);
    if (n <= 0) break;
    if (from.sll_pkttype == PACKET_OUTGOING) continue;
    size_t ihl = size_t(buf[0] & 0xf) * 4, tot = wire::read_be16(buf + 2);
    // The filter let it by; its lengths are still the wire's: a frame they do not fit is counted.
    if (n < 28 || ihl < 20 || tot > size_t(n) || tot < ihl + 8) {
      ++raw_malformed_;
      continue;
    }
    const uint8_t* udp = buf + ihl;
    size_t ulen = wire::read_be16(udp + 4);
    if (ulen < 8 || ihl + ulen > tot) {
      ++raw_malformed_;
      continue;
    }
    auto f = wire::FlowAddr::ipv4(wire::read_be32(buf + 12), wire::read_be32(buf + 16), wire::read_be16(udp),
                                  wire::read_be16(udp + 2));
    wire::Ipv4Fields ipf{wire::read_be16(buf + 4), wire::read_be16(buf + 6), buf[1], buf[8]};
    std::span<const uint8_t> pkt(udp + 8, ulen - 8);
    wire::Ipv4Fields ip = sink.deliver(pkt, f, now, ipf);
    if (pcap_) pcap_->write(f, pkt, now, ip);
    ++total;
    wire::expire(buf, size_t(n));
  }
  return total;
}

int UdpLink::poll_rx(PacketSink& sink, uint64_t now, int max) {
  // MADs from the daemon are rare and not urgent: their channel is read after every sleep and
  // every 64th busy poll, not at the cost of a system call on every turn of a spinning engine;
  // on every poll where the daemon passes on every packet, or while the last read found some
  // (packets a flow rule counts, polices or mirrors come this way). A busy CPU makes polls
  // rare (each yields to other work), so it is read at least every kFwdPollNs as well.
  int n = 0;
  if (fwd_fd_ >= 0 &&
      (fwd_only_ || fwd_due_ || fwd_busy_ || (++fwd_polls_ & 63) == 0 || now - fwd_polled_ns_ >= kFwdPollNs)) {
    fwd_due_ = false;
    fwd_polled_ns_ = now;
    n = poll_forwarded(sink, now, max);
    fwd_busy_ = n > 0;
  }
  if (fwd_only_) return n + (groups_.empty() || n >= max ? 0 : poll_groups(sink, now, max - n));
  // With AF_XDP the sockets get only what the program leaves to the kernel (a frame on another
  // queue, a fragment): read after every sleep and every 16th busy poll.
  bool sockets = true;
  if (xdp_) {
    if (n < max) n += poll_xdp(sink, now, max - n);
    sockets = std::exchange(sock_due_, false) || (++sock_polls_ & 15) == 0;
  }
  if (sockets) {
    if (ip_ && n < max) n += raw_fd_ >= 0 ? poll_raw(sink, now, max - n) : poll_v4(sink, now, max - n);
    if (!v6_.empty() && n < max) n += poll_v6(sink, now, max - n);
  }
  if (!groups_.empty() && n < max) n += poll_groups(sink, now, max - n);  // after the device's own
  return n;
}

int UdpLink::poll_v4_fd(int fd, uint32_t dst, PacketSink& sink, uint64_t now, int max) {
  int total = 0;
  while (total < max) {
    mmsghdr msgs[kRxBatch];
    iovec iov[kRxBatch];
    sockaddr_in src[kRxBatch];
    alignas(cmsghdr) RxCtrl ctrl[kRxBatch];
    prepare_rx(msgs, iov, src, sizeof src[0], ctrl);
    int r = recvmmsg(fd, msgs, kRxBatch, MSG_DONTWAIT, nullptr);
    if (r <= 0) break;
    for (int k = 0; k < r; ++k) {
      wire::FlowAddr f;
      f.src = Gid::from_ipv4(ntohl(src[k].sin_addr.s_addr));
      f.dst = Gid::from_ipv4(dst);
      f.src_port = ntohs(src[k].sin_port);
      f.dst_port = wire::kRoceV2Port;
      // With UDP GRO one buffer may hold several datagrams of gso_size bytes each.
      size_t len = msgs[k].msg_len, seg = len;
      wire::Ipv4Fields hidden;  // a UDP socket shows no IP header: the core solves for the ID
      hidden.seen = false;
      for (cmsghdr* cm = CMSG_FIRSTHDR(&msgs[k].msg_hdr); cm; cm = CMSG_NXTHDR(&msgs[k].msg_hdr, cm)) {
        if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
          int v;
          std::memcpy(&v, CMSG_DATA(cm), sizeof v);
          if (v > 0) seg = size_t(v);
        } else if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TOS) {
          hidden.tos = *CMSG_DATA(cm);  // GRO merges only datagrams whose TOS is the same
        }
      }
      const uint8_t* base = static_cast<uint8_t*>(iov[k].iov_base);
      size_t off = 0;
      do {  // an empty datagram is delivered too, to be counted
        std::span<const uint8_t> pkt(base + off, std::min(seg, len - off));
        wire::Ipv4Fields ip = sink.deliver(pkt, f, now, hidden);
        if (pcap_) pcap_->write(f, pkt, now, ip);
        hidden.id = uint16_t((ip.seen ? ip.id : hidden.id) + 1);  // segmentation numbers them one by one
        ++total;
        off += seg;
      } while (off < len);
      wire::expire(static_cast<uint8_t*>(iov[k].iov_base), len);
    }
    if (r < kRxBatch) break;
  }
  return total;
}

}  // namespace uroce::link

namespace uroce::link {

// The daemon asks what this process has (the uroce command): the lease's reporter answers.
void UdpLink::answer_status() {
  std::string text(nicproto::kStatusTag, sizeof nicproto::kStatusTag);
  if (lease_ && lease_->reporter) text += lease_->reporter();
  (void)::send(fwd_fd_, text.data(), text.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

// MADs for QP1 that the host NIC daemon passed on: each message is the flow's addresses, then
// the UDP payload, as the daemon's socket received it (no IP header: the core solves for the ID).
int UdpLink::poll_forwarded(PacketSink& sink, uint64_t now, int max) {
  int total = 0;
  uint8_t* buf = rx_buf_.data();
  while (total < max) {
    ssize_t n = recv(fwd_fd_, buf, kRxBufBytes, MSG_DONTWAIT);
    if (n < ssize_t(sizeof(nicproto::Forwarded))) break;
    nicproto::Forwarded h;
    std::memcpy(&h, buf, sizeof h);
    if (h.kind == nicproto::kStatusRequest) {
      answer_status();
      continue;
    }
    wire::FlowAddr f;
    std::memcpy(f.src.raw.data(), h.src, 16);
    std::memcpy(f.dst.raw.data(), h.dst, 16);
    f.src_port = h.src_port;
    f.dst_port = wire::kRoceV2Port;
    wire::Ipv4Fields hidden;
    hidden.seen = !wire::is_v4(f.src);  // IPv6 hides nothing the ICRC covers
    hidden.tos = h.tos;
    std::span<const uint8_t> pkt(buf + sizeof h, size_t(n) - sizeof h);
    wire::Ipv4Fields ip = sink.deliver(pkt, f, now, hidden);
    if (pcap_) pcap_->write(f, pkt, now, ip);
    ++total;
    wire::expire(buf, size_t(n));
  }
  return total;
}

}  // namespace uroce::link

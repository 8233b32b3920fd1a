#include "link/xdp_port.hpp"

#include <arpa/inet.h>
#include <net/if.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if_arp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "link/steering.hpp"
#include "wire/bytes.hpp"

#if UROCE_HAVE_XDP
#include <cstdarg>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <xdp/xsk.h>

// Multi-buffer AF_XDP (Linux 6.6), newer than the headers of the distribution.
#ifndef XDP_USE_SG
#define XDP_USE_SG (1 << 4)
#endif
#ifndef XDP_PKT_CONTD
#define XDP_PKT_CONTD (1 << 0)
#endif

// The XDP program, compiled at build time (xdp/roce_steer.bpf.c).
extern const unsigned char uroce_roce_steer_obj[];
extern const unsigned long uroce_roce_steer_obj_len;
#endif

namespace uroce::link {

#if UROCE_HAVE_XDP

namespace {

constexpr uint32_t kFrameSize = 4096;
// A transmit slot is two adjacent frames: a packet longer than one frame (MTU 9000) leaves as
// two descriptors over contiguous bytes.
constexpr uint32_t kTxSlot = 2 * kFrameSize;
constexpr size_t kMaxFrame = 16384;  // a received frame gathered from its fragments, at most
constexpr uint32_t kRxFrames = 2048, kTxFrames = 2048;
constexpr uint32_t kRingSize = 2048;
constexpr uint64_t kNeighbourRecheckNs = 1'000'000'000;  // a peer that moved is found within 1 s
constexpr uint64_t kUnresolvedRecheckNs = 10'000'000;
constexpr size_t kMaxNeighbours = 4096;
constexpr uint16_t kEthIpv4 = 0x0800, kEthIpv6 = 0x86dd;

// The Ethernet address of `addr` (an IPv4-mapped or IPv6 GID) on the interface, as the
// kernel's neighbour table has it (reachable, stale, delayed, probing or permanent), or false.
// One RTM_GETNEIGH request over rtnetlink, for ARP and neighbour discovery alike.
bool neighbour_lookup(uint32_t ifindex, const Gid& addr, std::array<uint8_t, 6>& mac) {
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return false;
  const bool v4 = wire::is_v4(addr);
  const size_t alen = v4 ? 4 : 16;
  struct {
    nlmsghdr h;
    ndmsg n;
    alignas(4) uint8_t attr[RTA_SPACE(16)];
  } req{};
  req.h.nlmsg_type = RTM_GETNEIGH;
  req.h.nlmsg_flags = NLM_F_REQUEST;
  req.n.ndm_family = v4 ? AF_INET : AF_INET6;
  req.n.ndm_ifindex = int(ifindex);
  auto* a = reinterpret_cast<rtattr*>(req.attr);
  a->rta_type = NDA_DST;
  a->rta_len = uint16_t(RTA_LENGTH(alen));
  std::memcpy(RTA_DATA(a), addr.raw.data() + (v4 ? 12 : 0), alen);
  req.h.nlmsg_len = uint32_t(NLMSG_LENGTH(sizeof req.n) + RTA_SPACE(alen));
  alignas(nlmsghdr) uint8_t buf[1024];
  bool ok = false;
  timeval tv{0, 100'000};  // the kernel answers at once; never wait long in a send path
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (send(fd, &req, req.h.nlmsg_len, 0) == ssize_t(req.h.nlmsg_len)) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    const auto* h = reinterpret_cast<const nlmsghdr*>(buf);
    if (n >= ssize_t(NLMSG_LENGTH(sizeof(ndmsg))) && NLMSG_OK(h, size_t(n)) && h->nlmsg_type == RTM_NEWNEIGH) {
      const auto* nd = static_cast<const ndmsg*>(NLMSG_DATA(h));
      constexpr uint16_t kUsable = NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT;
      int left = int(h->nlmsg_len - NLMSG_LENGTH(sizeof *nd));
      for (auto* ra = reinterpret_cast<const rtattr*>(reinterpret_cast<const uint8_t*>(nd) + NLMSG_ALIGN(sizeof *nd));
           (nd->ndm_state & kUsable) && RTA_OK(ra, left); ra = RTA_NEXT(ra, left)) {
        if (ra->rta_type == NDA_LLADDR && RTA_PAYLOAD(ra) == 6) {
          std::memcpy(mac.data(), RTA_DATA(ra), 6);
          ok = true;
        }
      }
    }
  }
  close(fd);
  return ok;
}

bool own_mac(uint32_t ifindex, std::array<uint8_t, 6>& mac) {
  char name[IF_NAMESIZE];
  if (!if_indextoname(ifindex, name)) return false;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  ifreq r{};
  std::memcpy(r.ifr_name, name, std::min(sizeof r.ifr_name - 1, std::strlen(name)));
  const bool ok = ioctl(fd, SIOCGIFHWADDR, &r) == 0 && r.ifr_hwaddr.sa_family == ARPHRD_ETHER;
  close(fd);
  if (ok) std::memcpy(mac.data(), r.ifr_hwaddr.sa_data, 6);
  return ok;
}

}  // namespace

struct XdpPort::State {
  bpf_object* obj = nullptr;
  int link_fd = -1;  // the program's attachment
  void* area = nullptr;
  size_t area_len = 0;
  xsk_umem* umem = nullptr;
  xsk_socket* xsk = nullptr;
  xsk_ring_prod fill{};
  xsk_ring_cons comp{};
  xsk_ring_cons rx{};
  xsk_ring_prod tx{};
  std::vector<uint64_t> free_tx;      // UMEM addresses of transmit slots not in flight
  std::vector<uint8_t> tx_pending;    // per transmit slot: its frames the kernel still has
  std::vector<uint8_t> gathered;      // a received frame in several fragments, made whole
  uint32_t rx_idx = 0;            // the first descriptor peek() returned
  ~State() {
    if (xsk) xsk_socket__delete(xsk);
    if (umem) xsk_umem__delete(umem);
    if (link_fd >= 0) close(link_fd);  // the program leaves the interface with it
    if (obj) bpf_object__close(obj);
    if (area) munmap(area, area_len);
  }
};

XdpPort::XdpPort() : s_(std::make_unique<State>()) {}
XdpPort::~XdpPort() = default;

int XdpPort::fd() const { return xsk_socket__fd(s_->xsk); }

namespace {

int quiet(enum libbpf_print_level, const char*, va_list) { return 0; }

struct SteerConfig {  // as in xdp/roce_steer.bpf.c
  uint32_t ip, slot, any_slot, qpn_shift;
};

}  // namespace

Result<std::unique_ptr<XdpPort>> XdpPort::open(const Config& c) {
  libbpf_set_print(quiet);  // failures come back as errors, said once by the caller
  std::unique_ptr<XdpPort> p(new XdpPort);
  State& s = *p->s_;
  p->ip_ = c.ip;
  p->ifindex_ = c.ifindex;
  char name[IF_NAMESIZE];
  if (!if_indextoname(c.ifindex, name)) return make_error(ENODEV, "no interface for AF_XDP");
  if (!own_mac(c.ifindex, p->mac_)) return make_error(EOPNOTSUPP, std::string(name) + " is not an Ethernet interface");
  // A frame longer than one UMEM frame (after the kernel's headroom) needs multi-buffer AF_XDP.
  const bool need_sg = c.ip_mtu + wire::kEthLen + XDP_PACKET_HEADROOM > kFrameSize;
  s.obj = bpf_object__open_mem(uroce_roce_steer_obj, uroce_roce_steer_obj_len, nullptr);
  if (!s.obj) return make_error(errno, "cannot open the XDP program");
  if (int r = bpf_object__load(s.obj); r != 0)
    return make_error(-r, std::string("cannot load the XDP program (needs CAP_NET_ADMIN and CAP_BPF): ") +
                              std::strerror(-r));
  bpf_program* prog = bpf_object__find_program_by_name(s.obj, "roce_steer");
  const int cfg_fd = bpf_object__find_map_fd_by_name(s.obj, "config");
  const int xsks_fd = bpf_object__find_map_fd_by_name(s.obj, "xsks");
  if (!prog || cfg_fd < 0 || xsks_fd < 0) return make_error(EINVAL, "the XDP program lacks its maps");
  const SteerConfig sc{htonl(c.ip), c.slot, c.any_slot ? 1u : 0u, uint32_t(steering::kQpnLocalBits)};
  const uint32_t zero = 0;
  if (bpf_map_update_elem(cfg_fd, &zero, &sc, 0) != 0) return make_error(errno, "cannot configure the XDP program");
  const int v6_fd = bpf_object__find_map_fd_by_name(s.obj, "v6_addrs");
  for (const Gid& g : c.v6) {
    const uint32_t one = 1;
    if (v6_fd < 0 || bpf_map_update_elem(v6_fd, g.raw.data(), &one, 0) != 0)
      return make_error(errno, "cannot give the XDP program the device's IPv6 addresses");
  }
  p->v6_ = c.v6;

  // A link attachment: the program leaves the interface when this process closes it or dies.
  // The driver's hook first; the generic one where the driver has none.
  for (uint32_t mode : {uint32_t(XDP_FLAGS_DRV_MODE), uint32_t(XDP_FLAGS_SKB_MODE)}) {
    bpf_link_create_opts lo{};
    lo.sz = sizeof lo;
    lo.flags = mode;
    s.link_fd = bpf_link_create(bpf_program__fd(prog), int(c.ifindex), BPF_XDP, &lo);
    if (s.link_fd >= 0) {
      p->native_ = mode == XDP_FLAGS_DRV_MODE;
      break;
    }
    if (errno == EBUSY || errno == EEXIST)
      return make_error(EBUSY, std::string("another XDP program is on ") + name);
  }
  if (s.link_fd < 0)
    return make_error(errno, std::string("cannot attach the XDP program to ") + name + ": " + std::strerror(errno));

  s.area_len = size_t(kRxFrames + kTxFrames) * kFrameSize;
  s.area = mmap(nullptr, s.area_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (s.area == MAP_FAILED) {
    s.area = nullptr;
    return make_error(errno, "cannot map the AF_XDP frames");
  }
  xsk_umem_config uc{kRingSize * 2, kRingSize, kFrameSize, 0, 0};
  if (int r = xsk_umem__create(&s.umem, s.area, s.area_len, &s.fill, &s.comp, &uc); r != 0)
    return make_error(-r, std::string("cannot register the AF_XDP frames: ") + std::strerror(-r));
  xsk_socket_config xc{};
  xc.rx_size = kRingSize;
  xc.tx_size = kRingSize;
  xc.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;
  // Zero copy before copy mode; multi-buffer where the kernel has it (needed above MTU ~3800).
  constexpr uint16_t kWake = XDP_USE_NEED_WAKEUP;
  auto bind_queue = [&] {
    int r = -EOPNOTSUPP;
    for (uint16_t bind : {uint16_t(XDP_ZEROCOPY | kWake | XDP_USE_SG), uint16_t(XDP_COPY | kWake | XDP_USE_SG),
                          uint16_t(XDP_ZEROCOPY | kWake), uint16_t(XDP_COPY | kWake)}) {
      if (need_sg && !(bind & XDP_USE_SG)) break;
      xc.bind_flags = bind;
      if ((r = xsk_socket__create(&s.xsk, name, 0, s.umem, &s.rx, &s.tx, &xc)) == 0) {
        p->zero_copy_ = bind & XDP_ZEROCOPY;
        p->multi_buffer_ = bind & XDP_USE_SG;
        break;
      }
      if (r == -EBUSY) break;
    }
    return r;
  };
  // Our program is attached, so no other live link has the queue; a socket of a process that
  // just exited may still hold it, until the kernel's deferred release: asked again for 1 s.
  int r = bind_queue();
  for (int i = 0; i < 50 && r == -EBUSY; ++i) {
    usleep(20'000);
    r = bind_queue();
  }
  if (r == -EBUSY) return make_error(EBUSY, std::string("queue 0 of ") + name + " has an AF_XDP socket already");
  if (r != 0 && need_sg)
    return make_error(-r, "MTU " + std::to_string(c.ip_mtu) + " needs multi-buffer AF_XDP, which " + name +
                              " does not offer: " + std::strerror(-r));
  if (r != 0) return make_error(-r, std::string("cannot open an AF_XDP socket on ") + name + ": " + std::strerror(-r));
  const int xfd = xsk_socket__fd(s.xsk);
  const uint32_t queue = 0;
  if (bpf_map_update_elem(xsks_fd, &queue, &xfd, 0) != 0) return make_error(errno, "cannot steer to the AF_XDP socket");

  uint32_t idx = 0;
  if (xsk_ring_prod__reserve(&s.fill, kRxFrames, &idx) != kRxFrames) return make_error(ENOMEM, "AF_XDP fill ring");
  for (uint32_t i = 0; i < kRxFrames; ++i) *xsk_ring_prod__fill_addr(&s.fill, idx + i) = uint64_t(i) * kFrameSize;
  xsk_ring_prod__submit(&s.fill, kRxFrames);
  for (uint32_t i = 0; i < kTxFrames * kFrameSize / kTxSlot; ++i)
    s.free_tx.push_back(uint64_t(kRxFrames) * kFrameSize + uint64_t(i) * kTxSlot);
  s.tx_pending.assign(kTxFrames * kFrameSize / kTxSlot, 0);
  s.gathered.resize(kMaxFrame);
  return p;
}

int XdpPort::peek(int max) {
  const uint32_t n = xsk_ring_cons__peek(&s_->rx, uint32_t(max), &s_->rx_idx);
  if (n == 0 && xsk_ring_prod__needs_wakeup(&s_->fill))
    recvfrom(fd(), nullptr, 0, MSG_DONTWAIT, nullptr, nullptr);
  return int(n);
}

// Ethernet, IPv4 without options or IPv6 without extension headers, UDP to 4791: what the
// program let by, checked again (it is the wire's), lengths from the headers, never beyond
// the frame.
// The number of descriptors, from the k-th of the n peeked, that make one frame (fragments
// carry XDP_PKT_CONTD but the last); 0 if its last has not arrived yet.
int XdpPort::frame_frags(int k, int n) const {
  for (int e = k; e < n; ++e)
    if (!(xsk_ring_cons__rx_desc(&s_->rx, s_->rx_idx + uint32_t(e))->options & XDP_PKT_CONTD)) return e - k + 1;
  return 0;
}

// A frame of `frags` descriptors from the k-th: in place if it has one, else gathered.
bool XdpPort::parse(int k, int frags, Frame& f) {
  const uint8_t* b = nullptr;
  size_t len = 0;
  for (int i = 0; i < frags; ++i) {
    const xdp_desc* d = xsk_ring_cons__rx_desc(&s_->rx, s_->rx_idx + uint32_t(k + i));
    if (d->len > kFrameSize || (d->addr % kFrameSize) + d->len > kFrameSize) return false;
    const uint8_t* at = static_cast<const uint8_t*>(xsk_umem__get_data(s_->area, d->addr));
    if (frags == 1) {
      b = at;
      len = d->len;
      break;
    }
    if (len + d->len > kMaxFrame) return false;
    std::memcpy(s_->gathered.data() + len, at, d->len);
    len += d->len;
    b = s_->gathered.data();
  }
  if (len < wire::kEthLen + wire::kIpv4Len + wire::kUdpLen) return false;
  const uint16_t type = wire::read_be16(b + 12);
  if (type == kEthIpv6) return parse_v6(b, len, f);
  if (type != kEthIpv4) return false;
  const uint8_t* ip = b + wire::kEthLen;
  const size_t tot = wire::read_be16(ip + 2);
  if (ip[0] != 0x45 || ip[9] != 17 || tot < wire::kIpv4Len + wire::kUdpLen || wire::kEthLen + tot > len) return false;
  if (wire::read_be16(ip + 6) & 0x3fff) return false;  // a fragment
  const uint8_t* udp = ip + wire::kIpv4Len;
  const size_t ulen = wire::read_be16(udp + 4);
  if (ulen < wire::kUdpLen || wire::kIpv4Len + ulen > tot || wire::read_be16(udp + 2) != wire::kRoceV2Port)
    return false;
  f.flow = wire::FlowAddr::ipv4(wire::read_be32(ip + 12), wire::read_be32(ip + 16), wire::read_be16(udp),
                                wire::read_be16(udp + 2));
  f.ip = wire::Ipv4Fields{wire::read_be16(ip + 4), wire::read_be16(ip + 6), ip[1], ip[8]};
  f.pkt = {udp + wire::kUdpLen, ulen - wire::kUdpLen};
  ++received_;
  return true;
}

bool XdpPort::parse_v6(const uint8_t* b, size_t len, Frame& f) {
  if (len < wire::kEthLen + wire::kIpv6Len + wire::kUdpLen) return false;
  const uint8_t* ip = b + wire::kEthLen;
  const size_t plen = wire::read_be16(ip + 4);
  if ((ip[0] >> 4) != 6 || ip[6] != 17 || plen < wire::kUdpLen || wire::kEthLen + wire::kIpv6Len + plen > len)
    return false;
  const uint8_t* udp = ip + wire::kIpv6Len;
  const size_t ulen = wire::read_be16(udp + 4);
  if (ulen < wire::kUdpLen || ulen > plen || wire::read_be16(udp + 2) != wire::kRoceV2Port) return false;
  std::memcpy(f.flow.src.raw.data(), ip + 8, 16);
  std::memcpy(f.flow.dst.raw.data(), ip + 24, 16);
  f.flow.src_port = wire::read_be16(udp);
  f.flow.dst_port = wire::kRoceV2Port;
  f.ip = wire::Ipv4Fields{};  // IPv6 hides nothing the ICRC covers; the traffic class for ECN
  f.ip.tos = uint8_t((ip[0] & 0xf) << 4 | ip[1] >> 4);
  f.ip.ttl = ip[7];
  f.pkt = {udp + wire::kUdpLen, ulen - wire::kUdpLen};
  ++received_;
  return true;
}

// The frames go back to the fill ring for the next arrivals.
void XdpPort::release(int n, int peeked) {
  if (peeked > n) xsk_ring_cons__cancel(&s_->rx, uint32_t(peeked - n));  // read again next time
  State& s = *s_;
  uint32_t idx = 0;
  const uint32_t got = xsk_ring_prod__reserve(&s.fill, uint32_t(n), &idx);
  for (uint32_t i = 0; i < got; ++i) {
    const uint64_t a = xsk_ring_cons__rx_desc(&s.rx, s.rx_idx + i)->addr;
    *xsk_ring_prod__fill_addr(&s.fill, idx + i) = a - a % kFrameSize;
  }
  xsk_ring_prod__submit(&s.fill, got);
  xsk_ring_cons__release(&s.rx, uint32_t(n));
}

// Transmit frames the kernel has finished with.
void XdpPort::reap() {
  uint32_t idx = 0;
  const uint32_t n = xsk_ring_cons__peek(&s_->comp, kRingSize, &idx);
  const uint64_t base = uint64_t(kRxFrames) * kFrameSize;
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t a = *xsk_ring_cons__comp_addr(&s_->comp, idx + i);
    if (a < base || a >= s_->area_len) continue;  // not one of ours: the kernel's to explain
    const size_t slot = (a - base) / kTxSlot;
    if (s_->tx_pending[slot] && --s_->tx_pending[slot] == 0) s_->free_tx.push_back(base + slot * kTxSlot);
  }
  xsk_ring_cons__release(&s_->comp, n);
}

const uint8_t* XdpPort::neighbour(const Gid& addr, uint64_t now) {
  // A UD QP may address any number of peers: the cache is forgotten rather than grown past
  // kMaxNeighbours (the kernel's table answers again within the call).
  if (neighbours_.size() >= kMaxNeighbours && !neighbours_.count(addr.raw)) neighbours_.clear();
  Neighbour& n = neighbours_[addr.raw];
  // Not known yet: asked again soon, as the socket's send that goes meanwhile resolves it.
  if (n.checked_ns == 0 || now - n.checked_ns >= (n.known ? kNeighbourRecheckNs : kUnresolvedRecheckNs)) {
    n.known = neighbour_lookup(ifindex_, addr, n.mac);
    n.checked_ns = now ? now : 1;
  }
  return n.known ? n.mac.data() : nullptr;
}

bool XdpPort::queue(const wire::PacketBuf& p, uint64_t now) {
  const bool v4 = p.flow.v4();
  if (v4 ? wire::v4_of(p.flow.src) != ip_ || ip_ == 0
         : std::find(v6_.begin(), v6_.end(), p.flow.src) == v6_.end())
    return false;
  const uint8_t* dmac = neighbour(p.flow.dst, now);
  if (!dmac) return false;
  State& s = *s_;
  if (s.free_tx.empty()) reap();
  uint32_t idx = 0;
  const size_t frame_len = wire::kEthLen + wire::ip_udp_len(p.flow) + p.len;
  const uint32_t frags = frame_len > kFrameSize ? 2 : 1;
  if (frame_len > kTxSlot || (frags > 1 && !multi_buffer_)) return false;
  if (s.free_tx.empty() || xsk_ring_prod__reserve(&s.tx, frags, &idx) != frags) return false;
  const uint64_t addr = s.free_tx.back();
  s.free_tx.pop_back();
  uint8_t* b = static_cast<uint8_t*>(xsk_umem__get_data(s.area, addr));
  std::memcpy(b, dmac, 6);
  std::memcpy(b + 6, mac_.data(), 6);
  wire::write_be16(b + 12, v4 ? kEthIpv4 : kEthIpv6);
  wire::Ipv4Fields ip;  // ID 0 and DF, as the ICRC was made for; ECT(0) as the UDP sockets send
  ip.tos = uint8_t((p.tclass & ~wire::kEcnMask) | wire::kEcnEct0);  // the QP's DSCP
  uint8_t* iph = b + wire::kEthLen;
  const size_t h = wire::kEthLen + wire::write_ip_udp(iph, p.flow, p.len, ip);
  p.copy_to(b + h);
  if (!v4) {  // IPv6 requires the UDP checksum the kernel would have made
    uint8_t* udp = iph + wire::kIpv6Len;
    wire::write_be16(udp + 6, wire::udp6_checksum(iph, udp, wire::kUdpLen + p.len));
  }
  for (uint32_t i = 0; i < frags; ++i) {  // over the slot's two adjacent frames
    xdp_desc* d = xsk_ring_prod__tx_desc(&s.tx, idx + i);
    d->addr = addr + i * kFrameSize;
    d->len = uint32_t(std::min<size_t>(frame_len - i * kFrameSize, kFrameSize));
    d->options = i + 1 < frags ? XDP_PKT_CONTD : 0;
  }
  s.tx_pending[(addr - uint64_t(kRxFrames) * kFrameSize) / kTxSlot] = uint8_t(frags);
  xsk_ring_prod__submit(&s.tx, frags);
  ++queued_;
  ++sent_;
  return true;
}

void XdpPort::flush() {
  if (queued_ == 0) return;
  queued_ = 0;
  // Copy mode always needs the kick, and sends at most 32 frames per kick: again until the
  // ring is taken (bounded: a kick that moves nothing ends it). Zero copy only when the driver
  // asks for it.
  xsk_ring_prod& tx = s_->tx;
  if (!zero_copy_ || xsk_ring_prod__needs_wakeup(&tx)) {
    for (int i = 0; i < 256; ++i) {
      const uint32_t before = __atomic_load_n(tx.consumer, __ATOMIC_ACQUIRE);
      if (before == tx.cached_prod) break;
      if (sendto(fd(), nullptr, 0, MSG_DONTWAIT, nullptr, 0) < 0 && errno != EAGAIN && errno != EBUSY) break;
      if (__atomic_load_n(tx.consumer, __ATOMIC_ACQUIRE) == before) break;
    }
  }
  reap();
}

#else  // built without libxdp/libbpf

struct XdpPort::State {};
XdpPort::XdpPort() = default;
XdpPort::~XdpPort() = default;
int XdpPort::fd() const { return -1; }
Result<std::unique_ptr<XdpPort>> XdpPort::open(const Config&) {
  return make_error(EOPNOTSUPP, "built without AF_XDP (libxdp-dev, libbpf-dev and clang at build time)");
}
int XdpPort::peek(int) { return 0; }
int XdpPort::frame_frags(int, int) const { return 0; }
bool XdpPort::parse(int, int, Frame&) { return false; }
void XdpPort::release(int, int) {}
void XdpPort::reap() {}
const uint8_t* XdpPort::neighbour(const Gid&, uint64_t) { return nullptr; }
bool XdpPort::parse_v6(const uint8_t*, size_t, Frame&) { return false; }
bool XdpPort::queue(const wire::PacketBuf&, uint64_t) { return false; }
void XdpPort::flush() {}

#endif

}  // namespace uroce::link

// The send path of the UDP link: batches of packets in one sendmmsg, runs of equal-size packets
// to one peer in one datagram the kernel (or the NIC) segments (UDP GSO), payloads read straight
// from registered memory.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>

#include <cerrno>
#include <cstring>

#include "link/iface.hpp"
#include "link/udp_link.hpp"
#include "wire/icrc.hpp"
#include "wire/ip_udp.hpp"
#include "wire/opcode.hpp"

namespace uroce::link {

namespace {

// Segmentation offload (UDP GSO): one send carries a run of equal-size RoCE packets, each its
// own datagram on the wire. The first leaves with IP ID 0 (an unconnected socket, DF) and
// segmentation, in the kernel or the NIC, numbers the rest 1, 2, ...; the ICRC covers the ID,
// so segment k's is made for ID k before the send.
constexpr unsigned kMaxGsoSegs = 64;
constexpr size_t kMaxGsoBytes = 65000;

// Where a packet goes, for sendmmsg: the address, and for IPv6 the source address (IPV6_PKTINFO:
// the send sockets are bound to :: so that one socket serves every address of the port).
socklen_t fill_dst(sockaddr_storage& to, const wire::FlowAddr& f, uint32_t ifindex) {
  to = {};
  if (f.v4()) {
    auto& a = reinterpret_cast<sockaddr_in&>(to);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(wire::v4_of(f.dst));
    a.sin_port = htons(f.dst_port);
    return sizeof a;
  }
  auto& a = reinterpret_cast<sockaddr_in6&>(to);
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(f.dst_port);
  std::memcpy(&a.sin6_addr, f.dst.raw.data(), 16);
  if (is_link_local(f.dst) || wire::is_multicast(f.dst)) a.sin6_scope_id = ifindex;  // a group: out of the device's interface
  return sizeof a;
}

// The control messages of one send: the IPv6 source, the segment size of a run, and a DSCP
// other than the socket's 0 (IP_TOS / IPV6_TCLASS; ECN stays ECT(0), the socket's).
size_t fill_ctrl(char* buf, size_t room, const wire::FlowAddr& f, uint32_t ifindex, uint16_t gso_size,
                 uint8_t tclass) {
  msghdr m{};
  m.msg_control = buf;
  m.msg_controllen = room;
  std::memset(buf, 0, room);  // the kernel copies the alignment padding too
  size_t used = 0;
  cmsghdr* cm = CMSG_FIRSTHDR(&m);
  if (!f.v4()) {
    cm->cmsg_level = IPPROTO_IPV6;
    cm->cmsg_type = IPV6_PKTINFO;
    cm->cmsg_len = CMSG_LEN(sizeof(in6_pktinfo));
    in6_pktinfo info{};
    std::memcpy(&info.ipi6_addr, f.src.raw.data(), 16);
    info.ipi6_ifindex = is_link_local(f.src) || wire::is_multicast(f.dst) ? ifindex : 0;
    std::memcpy(CMSG_DATA(cm), &info, sizeof info);
    used += CMSG_SPACE(sizeof(in6_pktinfo));
    cm = CMSG_NXTHDR(&m, cm);
  }
  if (gso_size) {
    cm->cmsg_level = SOL_UDP;
    cm->cmsg_type = UDP_SEGMENT;
    cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    std::memcpy(CMSG_DATA(cm), &gso_size, sizeof gso_size);
    used += CMSG_SPACE(sizeof(uint16_t));
    cm = CMSG_NXTHDR(&m, cm);
  }
  if (const int tos = (tclass & ~wire::kEcnMask) | wire::kEcnEct0; tos != wire::kEcnEct0) {
    cm->cmsg_level = f.v4() ? IPPROTO_IP : IPPROTO_IPV6;
    cm->cmsg_type = f.v4() ? IP_TOS : IPV6_TCLASS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cm), &tos, sizeof tos);
    used += CMSG_SPACE(sizeof(int));
  }
  return used;
}

bool same_sender(const wire::FlowAddr& a, const wire::FlowAddr& b) {
  return a.src_port == b.src_port && a.v4() == b.v4();
}

}  // namespace

// Runs are mostly of the path MTU's packets, with a shorter last: two lengths kept.
const wire::Ipv4IdShift& UdpLink::id_shift(uint32_t ib_len) {
  for (const auto& [len, shift] : id_shifts_)
    if (len == ib_len) return shift;
  auto& slot = id_shifts_[id_shift_next_++ % id_shifts_.size()];
  slot = {ib_len, wire::Ipv4IdShift(ib_len)};
  return slot.second;
}

// Packets to a resolved neighbour by the XDP port, the rest by the sockets.
void UdpLink::send(std::span<wire::PacketBuf* const> q, uint64_t now) {
  if (!xdp_) return send_sockets(q, now);
  rest_.clear();
  for (wire::PacketBuf* p : q) {
    // Once one goes by the socket (sent after the XSK's), so do the rest: no packet of a flow
    // overtakes an earlier one.
    if (!rest_.empty() || !xdp_->queue(*p, now)) {
      rest_.push_back(p);
      continue;
    }
    if (pcap_) {
      p->materialize();
      wire::Ipv4Fields ip;
      ip.tos = uint8_t((p->tclass & ~wire::kEcnMask) | wire::kEcnEct0);
      pcap_->write(p->flow, {p->data, p->len}, now, ip);
    }
  }
  xdp_->flush();
  if (!rest_.empty()) send_sockets(rest_, now);
}

void UdpLink::send_sockets(std::span<wire::PacketBuf* const> q, uint64_t now) {
  constexpr unsigned kMsgs = kBatch;
  constexpr size_t kCtrl = CMSG_SPACE(sizeof(in6_pktinfo)) + CMSG_SPACE(sizeof(uint16_t)) + CMSG_SPACE(sizeof(int));
  mmsghdr msgs[kMsgs];
  iovec iov[kMsgs * kMaxGsoSegs * 3];  // a packet whose payload is by reference takes three
  sockaddr_storage dst[kMsgs];
  alignas(cmsghdr) char ctrl[kMsgs][kCtrl];
  bool run[kMsgs];  // the message carries a GSO run
  size_t i = 0;
  while (i < q.size()) {
    // One sendmmsg per run of packets of one IP version leaving from the same source port.
    const wire::FlowAddr& lead = q[i]->flow;
    const bool v4 = lead.v4();
    int fd = -1;
    for (int k = 0; k < kTxSockets; ++k)
      if (tx_port_[k] == lead.src_port) fd = v4 ? tx_fd_[k] : tx6_fd_[k];
    if (fd < 0) fd = v4 ? tx_fd_[0] : tx6_fd_[0];
    unsigned n = 0, nio = 0;
    while (i < q.size() && n < kMsgs && same_sender(q[i]->flow, lead)) {
      wire::PacketBuf* p = q[i];
      // A GSO run: same addresses, same size (the last may be shorter).
      unsigned segs = 1;
      if (gso_ && !wire::is_multicast(p->flow.dst)) {  // a group's datagrams loop back one by one
        while (i + segs < q.size() && segs < kMaxGsoSegs && (segs + 1) * p->len <= kMaxGsoBytes) {
          const wire::PacketBuf* nx = q[i + segs];
          if (!same_sender(nx->flow, p->flow) || nx->flow.dst != p->flow.dst || nx->flow.src != p->flow.src ||
              nx->flow.dst_port != p->flow.dst_port || nx->tclass != p->tclass || nx->len > p->len)
            break;
          ++segs;
          if (nx->len < p->len) break;
        }
      }
      const unsigned first_io = nio;
      for (unsigned k = 0; k < segs; ++k) {
        wire::PacketBuf* s = q[i + k];
        wire::Ipv4Fields ip;
        ip.tos = uint8_t((s->tclass & ~wire::kEcnMask) | wire::kEcnEct0);  // as it leaves (the capture's)
        if (k > 0 && v4) {
          ip.id = uint16_t(k);
          const uint32_t ib_len = s->len - wire::kIcrcLen;
          uint8_t* icrc = s->data + ib_len;
          wire::icrc_store(icrc, id_shift(ib_len)(wire::icrc_load(icrc), 0, ip.id));
        }
        if (pcap_) {  // the capture needs the packet whole
          s->materialize();
          pcap_->write(s->flow, {s->data, s->len}, now, ip);
        }
        // Headers, the payload straight from registered memory, pad and ICRC: no staging copy.
        for (std::span<const uint8_t> piece : s->pieces(s->len))
          if (!piece.empty()) iov[nio++] = {const_cast<uint8_t*>(piece.data()), piece.size()};
      }
      msgs[n] = {};
      msgs[n].msg_hdr.msg_iov = &iov[first_io];
      msgs[n].msg_hdr.msg_iovlen = nio - first_io;
      msgs[n].msg_hdr.msg_name = &dst[n];
      msgs[n].msg_hdr.msg_namelen = fill_dst(dst[n], p->flow, ifindex_);
      if (const size_t used = fill_ctrl(ctrl[n], kCtrl, p->flow, ifindex_, segs > 1 ? uint16_t(p->len) : 0, p->tclass)) {
        msgs[n].msg_hdr.msg_control = ctrl[n];
        msgs[n].msg_hdr.msg_controllen = used;
      }
      run[n] = segs > 1;
      i += segs;
      ++n;
    }
    unsigned sent = 0;
    while (fd >= 0 && sent < n) {  // no IPv6 here: as lost
      int r = sendmmsg(fd, msgs + sent, n - sent, 0);
      if (r > 0) {
        sent += unsigned(r);
        continue;
      }
      // A full socket buffer is a lost packet: retransmission recovers. So is a run the route
      // cannot segment (no checksum offload: EIO; a smaller path MTU: EINVAL): runs stop.
      if ((errno == EIO || errno == EINVAL) && run[sent]) gso_ = false;
      break;
    }
  }
}

}  // namespace uroce::link

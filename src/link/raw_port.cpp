#include "link/raw_port.hpp"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace uroce::link {
namespace {
constexpr size_t kVlanLen = 4;
constexpr size_t kMaxDeferred = 4096;  // frames waiting for room in the socket's send buffer
}  // namespace

Result<std::unique_ptr<RawPort>> RawPort::open(uint32_t ifindex, bool loopback) {
  // Protocol 0 until bound: a socket of ETH_P_ALL would queue other interfaces' frames first.
  int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    int e = errno;
    return make_error(e, std::string("raw packet QP: AF_PACKET socket: ") + std::strerror(e) +
                             (e == EPERM ? " (raw packet QPs need CAP_NET_RAW, as the kernel's do)" : ""));
  }
  sockaddr_ll a{};
  a.sll_family = AF_PACKET;
  a.sll_protocol = htons(ETH_P_ALL);
  a.sll_ifindex = int(ifindex);
  const int on = 1;  // the kernel takes 802.1Q tags off before we see a frame: hear of them
  if (setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &on, sizeof on) < 0 ||
      bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) {
    int e = errno;
    close(fd);
    return make_error(e, std::string("raw packet QP: binding to the interface: ") + std::strerror(e));
  }
  return std::unique_ptr<RawPort>(new RawPort(fd, loopback));
}

RawPort::~RawPort() { close(fd_); }

uint64_t RawPort::send(std::vector<std::vector<uint8_t>>& frames, const Deliver& deliver) {
  size_t sent = 0;
  uint64_t dropped = 0;
  for (; sent < frames.size(); ++sent) {
    const auto& f = frames[sent];
    if (::send(fd_, f.data(), f.size(), MSG_DONTWAIT) != ssize_t(f.size())) {
      if (errno == EAGAIN || errno == ENOBUFS) break;  // no room now: the rest wait, in order
      ++dropped;  // refused by the interface (too long for it, down)
      continue;
    }
    if (!loopback_ && (f[0] & 1)) deliver(f);
  }
  frames.erase(frames.begin(), frames.begin() + ptrdiff_t(sent));
  if (frames.size() > kMaxDeferred) {  // the interface takes nothing: the oldest go
    dropped += frames.size() - kMaxDeferred;
    frames.erase(frames.begin(), frames.end() - ptrdiff_t(kMaxDeferred));
  }
  return dropped;
}

int RawPort::poll(const Deliver& deliver, int max) {
  int n = 0;
  uint8_t* const frame = buf_.data() + kVlanLen;  // room in front to put a tag back
  while (n < max) {
    sockaddr_ll from{};
    alignas(tpacket_auxdata) uint8_t cbuf[CMSG_SPACE(sizeof(tpacket_auxdata))];
    iovec iov{frame, buf_.size() - kVlanLen};
    msghdr m{};
    m.msg_name = &from;
    m.msg_namelen = sizeof from;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = cbuf;
    m.msg_controllen = sizeof cbuf;
    ssize_t r = recvmsg(fd_, &m, MSG_DONTWAIT | MSG_TRUNC);
    if (r < 0) break;
    ++n;
    if (size_t(r) > iov.iov_len || r < ssize_t(ETH_HLEN)) continue;  // cut short, or no Ethernet header
    if (from.sll_pkttype == PACKET_OUTGOING) {
      // Loopback shows each frame twice, going and coming: take it coming. Elsewhere another
      // process's frame comes up only as a NIC loops it back: to a group or broadcast.
      if (loopback_ || !(frame[0] & 1)) continue;
    }
    if (from.sll_pkttype == PACKET_OTHERHOST) continue;  // not for this host: the NIC would filter it
    uint8_t* at = frame;
    size_t len = size_t(r);
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
      if (c->cmsg_level != SOL_PACKET || c->cmsg_type != PACKET_AUXDATA) continue;
      tpacket_auxdata aux;
      std::memcpy(&aux, CMSG_DATA(c), sizeof aux);
      if (!(aux.tp_status & TP_STATUS_VLAN_VALID)) continue;
      // The tag the kernel took off goes back after the MACs, as it was on the wire.
      const uint16_t tpid = (aux.tp_status & TP_STATUS_VLAN_TPID_VALID) ? aux.tp_vlan_tpid : ETH_P_8021Q;
      at = buf_.data();
      std::memmove(at, frame, 12);
      at[12] = uint8_t(tpid >> 8), at[13] = uint8_t(tpid);
      at[14] = uint8_t(aux.tp_vlan_tci >> 8), at[15] = uint8_t(aux.tp_vlan_tci);
      len += kVlanLen;
    }
    deliver({at, len});
  }
  return n;
}

}  // namespace uroce::link

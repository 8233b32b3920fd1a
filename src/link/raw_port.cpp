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

Result<std::unique_ptr<RawPort>> RawPort::open(uint32_t ifindex, bool loopback) {
  int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (fd < 0) {
    int e = errno;
    return make_error(e, std::string("raw packet QP: AF_PACKET socket: ") + std::strerror(e) +
                             (e == EPERM ? " (raw packet QPs need CAP_NET_RAW, as the kernel's do)" : ""));
  }
  sockaddr_ll a{};
  a.sll_family = AF_PACKET;
  a.sll_protocol = htons(ETH_P_ALL);
  a.sll_ifindex = int(ifindex);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) {
    int e = errno;
    close(fd);
    return make_error(e, std::string("raw packet QP: binding to the interface: ") + std::strerror(e));
  }
  return std::unique_ptr<RawPort>(new RawPort(fd, loopback));
}

RawPort::~RawPort() { close(fd_); }

void RawPort::send(std::vector<std::vector<uint8_t>>& frames, const Deliver& deliver) {
  for (const auto& f : frames) {
    if (::send(fd_, f.data(), f.size(), MSG_DONTWAIT) != ssize_t(f.size())) {
      ++send_errors_;
      continue;
    }
    if (!loopback_ && (f[0] & 1)) deliver(f);
  }
  frames.clear();
}

int RawPort::poll(const Deliver& deliver, int max) {
  int n = 0;
  while (n < max) {
    sockaddr_ll from{};
    socklen_t flen = sizeof from;
    ssize_t r = recvfrom(fd_, buf_.data(), buf_.size(), MSG_DONTWAIT | MSG_TRUNC, reinterpret_cast<sockaddr*>(&from), &flen);
    if (r < 0) break;
    ++n;
    if (size_t(r) > buf_.size()) continue;  // larger than any MTU here: not a frame we could place
    if (from.sll_pkttype == PACKET_OUTGOING) {
      // Loopback shows each frame twice, going and coming: take it coming. Elsewhere a frame
      // this host sends comes up only as a NIC loops it back: to a group or broadcast.
      if (loopback_ || r < 6 || !(buf_[0] & 1)) continue;
    }
    deliver({buf_.data(), size_t(r)});
  }
  return n;
}

}  // namespace uroce::link

#include "link/udp_sockets.hpp"

#include <arpa/inet.h>
#include <netinet/udp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "wire/ip_udp.hpp"

namespace uroce::link {

// 8 MiB each way (more if we may): a burst of a window's packets must not overflow them.
static void set_buffers(int fd) {
  int buf = 8 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf) != 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
}

// fd bound to the address, or -1 (closed, *err set).
static int bind_or_close(int fd, const void* addr, socklen_t len, int* err) {
  if (bind(fd, static_cast<const sockaddr*>(addr), len) == 0) return fd;
  *err = errno;
  close(fd);
  return -1;
}

namespace {
int new_socket_v4(int* err) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  int pmtu = IP_PMTUDISC_DO;  // DF=1, and with it IP ID 0 on an unconnected socket
  setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
  // ECN, as RoCE NICs do it: send ECT(0), so a congested fabric can mark CE instead of
  // dropping, and read the bits of what arrives (a CE mark makes the core answer with a CNP).
  int ect = wire::kEcnEct0, one = 1;
  setsockopt(fd, IPPROTO_IP, IP_TOS, &ect, sizeof ect);
  setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);
  set_buffers(fd);
  return fd;
}
}  // namespace

int make_socket(uint32_t ip, uint16_t port, int* err, bool reuseport) {
  int fd = new_socket_v4(err), one = 1;
  if (fd < 0) return -1;
  if (reuseport) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(ip);
  a.sin_port = htons(port);
  return bind_or_close(fd, &a, sizeof a, err);
}

int make_group_socket(uint32_t group, uint32_t local_ip, uint32_t ifindex, int* err) {
  int fd = new_socket_v4(err), one = 1, zero = 0;
  if (fd < 0) return -1;
  // Every process of the host that joins binds the same group address and port: the kernel
  // gives each socket its own copy of what arrives. Only of what arrives on the interface this
  // socket joined on: without IP_MULTICAST_ALL off it would take the group from any interface
  // where anything on the host joined it.
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof zero);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(group);
  a.sin_port = htons(wire::kRoceV2Port);
  if ((fd = bind_or_close(fd, &a, sizeof a, err)) < 0) return -1;
  ip_mreqn m{};
  m.imr_multiaddr.s_addr = htonl(group);
  m.imr_address.s_addr = htonl(local_ip);  // on the interface that holds the device's address
  m.imr_ifindex = int(ifindex);
  if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof m) == 0) return fd;
  *err = errno;
  close(fd);
  return -1;
}

namespace {
int new_socket_v6(int* err) {
  int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  int one = 1, pmtu = IPV6_PMTUDISC_DO;
  setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof pmtu);
  setsockopt(fd, IPPROTO_IPV6, IPV6_FREEBIND, &one, sizeof one);  // a tentative address (DAD) is fine
  // RoCE senders (rxe, NICs) leave the UDP checksum 0, which IPv6 otherwise forbids; the ICRC
  // covers the packet instead (A17.4.3).
  setsockopt(fd, IPPROTO_UDP, UDP_NO_CHECK6_RX, &one, sizeof one);
  int ect = wire::kEcnEct0;  // ECN as over IPv4 (make_socket)
  setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &ect, sizeof ect);
  setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof one);
  set_buffers(fd);
  return fd;
}

int bind6_or_close(int fd, const Gid& addr, uint32_t scope, uint16_t port, int* err) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  std::memcpy(&a.sin6_addr, addr.raw.data(), 16);
  a.sin6_scope_id = scope;
  return bind_or_close(fd, &a, sizeof a, err);
}
}  // namespace

int make_socket6(const Gid& addr, uint32_t scope, uint16_t port, int* err, bool reuseport) {
  int fd = new_socket_v6(err), one = 1;
  if (fd < 0) return -1;
  if (reuseport) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  return bind6_or_close(fd, addr, scope, port, err);
}

// As make_group_socket: every member process binds the group, each gets its own copy, of what
// arrives on the interface it joined on.
int make_group_socket6(const Gid& group, uint32_t ifindex, int* err) {
  int fd = new_socket_v6(err), one = 1, zero = 0;
  if (fd < 0) return -1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_ALL, &zero, sizeof zero);
  if ((fd = bind6_or_close(fd, group, ifindex, wire::kRoceV2Port, err)) < 0) return -1;
  ipv6_mreq m{};
  std::memcpy(&m.ipv6mr_multiaddr, group.raw.data(), 16);
  m.ipv6mr_interface = ifindex;
  if (setsockopt(fd, IPPROTO_IPV6, IPV6_ADD_MEMBERSHIP, &m, sizeof m) == 0) return fd;
  *err = errno;
  close(fd);
  return -1;
}

}  // namespace uroce::link

#include "link/iface.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "wire/ip_udp.hpp"

namespace uroce::link {

namespace {

bool holds(const ifaddrs* i, const Gid& addr) {
  if (i->ifa_addr->sa_family == AF_INET && wire::is_v4(addr)) {
    uint32_t ip = wire::v4_of(addr);
    uint32_t a = ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
    return a == ip || ((i->ifa_flags & IFF_LOOPBACK) && (ip >> 24) == 127);
  }
  if (i->ifa_addr->sa_family == AF_INET6 && !wire::is_v4(addr))
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr, addr.raw.data(), 16) == 0;
  return false;
}

}  // namespace

Interface find_interface(const Gid& addr) {
  Interface out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i && out.name.empty(); i = i->ifa_next)
    if (i->ifa_addr && holds(i, addr)) {
      out.name = i->ifa_name;
      out.loopback = i->ifa_flags & IFF_LOOPBACK;
    }
  for (ifaddrs* i = list; i && !out.name.empty(); i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET6 || out.name != i->ifa_name) continue;
    Gid g;
    std::memcpy(g.raw.data(), &reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr, 16);
    out.ipv6.push_back(g);
  }
  freeifaddrs(list);
  std::stable_partition(out.ipv6.begin(), out.ipv6.end(), is_link_local);
  if (out.name.empty()) return out;
  out.index = if_nametoindex(out.name.c_str());
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ifreq r{};
  if (fd >= 0 && out.name.size() < sizeof r.ifr_name) {
    std::memcpy(r.ifr_name, out.name.c_str(), out.name.size());
    if (ioctl(fd, SIOCGIFMTU, &r) == 0 && r.ifr_mtu > 0) out.mtu = uint32_t(r.ifr_mtu);
    if (ioctl(fd, SIOCGIFHWADDR, &r) == 0) std::memcpy(out.mac.data(), r.ifr_hwaddr.sa_data, out.mac.size());
  }
  if (fd >= 0) close(fd);
  return out;
}

uint64_t node_guid(const Interface& itf) {
  const auto& m = itf.mac;
  if (m != std::array<uint8_t, 6>{}) {
    return uint64_t(m[0] ^ 0x02) << 56 | uint64_t(m[1]) << 48 | uint64_t(m[2]) << 40 | 0xfffeull << 24 |
           uint64_t(m[3]) << 16 | uint64_t(m[4]) << 8 | m[5];
  }
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the machine ID
  std::ifstream f("/etc/machine-id");
  for (char c; f.get(c);) h = (h ^ uint8_t(c)) * 0x100000001b3ull;
  return 0x0200000000000000ull | (h & 0x00ffffffffffffffull);
}

}  // namespace uroce::link

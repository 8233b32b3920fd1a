#include "link/iface.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

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
  if (getifaddrs(&list) != 0) {
    out.error = errno;
    return out;
  }
  for (ifaddrs* i = list; i && out.name.empty(); i = i->ifa_next)
    if (i->ifa_addr && holds(i, addr)) {
      out.name = i->ifa_name;
      out.loopback = i->ifa_flags & IFF_LOOPBACK;
    }
  for (ifaddrs* i = list; i && !out.name.empty(); i = i->ifa_next) {
    if (!i->ifa_addr || out.name != i->ifa_name) continue;
    if (i->ifa_addr->sa_family == AF_INET && !out.ipv4)
      out.ipv4 = ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
    if (i->ifa_addr->sa_family != AF_INET6) continue;
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

Error unreadable_interfaces(int err) {
  return make_error(err, std::string("cannot read the host's network interfaces: ") + std::strerror(err));
}

namespace {

// The interface index of a default route in /proc/net/route (IPv4) or /proc/net/ipv6_route;
// 0 without one. Loopback's "unreachable" IPv6 defaults do not count.
uint32_t default_route_interface() {
  std::ifstream v4("/proc/net/route");
  std::string line;
  std::getline(v4, line);  // header
  while (std::getline(v4, line)) {
    char name[IF_NAMESIZE + 1] = {};
    unsigned long dst = 1, gw = 0, flags = 0, mask = 1;
    if (std::sscanf(line.c_str(), "%16s %lx %lx %lx %*d %*d %*d %lx", name, &dst, &gw, &flags, &mask) == 5 &&
        dst == 0 && mask == 0 && (flags & 1))  // RTF_UP
      if (uint32_t i = if_nametoindex(name)) return i;
  }
  std::ifstream v6("/proc/net/ipv6_route");
  while (std::getline(v6, line)) {
    char dst[33] = {}, name[IF_NAMESIZE + 1] = {};
    unsigned plen = 1, flags = 0;
    if (std::sscanf(line.c_str(), "%32s %x %*s %*s %*s %*s %*s %*s %x %16s", dst, &plen, &flags, name) == 4 &&
        plen == 0 && std::string(dst) == std::string(32, '0') && !(flags & 0x200) && std::string(name) != "lo")
      if (uint32_t i = if_nametoindex(name)) return i;
  }
  return 0;
}

bool listed(const std::string& only, const std::string& name) {
  if (only.empty()) return true;
  std::stringstream names(only);
  for (std::string n; std::getline(names, n, ',');)
    if (n == name) return true;
  return false;
}

}  // namespace

std::vector<Candidate> order_interfaces(std::vector<Candidate> all, uint32_t default_route, const std::string& only) {
  std::erase_if(all, [&](const Candidate& c) { return !listed(only, c.name); });
  std::stable_sort(all.begin(), all.end(), [&](const Candidate& a, const Candidate& b) {
    auto rank = [&](const Candidate& c) { return c.loopback ? 2 : c.index == default_route ? 0 : 1; };
    return rank(a) != rank(b) ? rank(a) < rank(b) : a.index < b.index;
  });
  return all;
}

std::vector<Candidate> shown_interfaces(std::vector<Candidate> ordered, const std::string& only) {
  const bool other = std::any_of(ordered.begin(), ordered.end(), [](const Candidate& c) { return !c.loopback; });
  // A loopback interface still in a non-empty `only` was named there: it stays.
  if (other && only.empty()) std::erase_if(ordered, [](const Candidate& c) { return c.loopback; });
  return ordered;
}

std::vector<Candidate> device_interfaces(const std::string& only, int* error) {
  std::vector<Candidate> all;
  ifaddrs* list = nullptr;
  if (error) *error = 0;
  if (getifaddrs(&list) != 0) {
    if (error) *error = errno;
    return all;
  }
  for (int pass = 0; pass < 2; ++pass)  // IPv4 addresses first: they are the device's address where there is one
    for (ifaddrs* i = list; i; i = i->ifa_next) {
      if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
      Gid g;
      if (pass == 0 && i->ifa_addr->sa_family == AF_INET) {
        g = Gid::from_ipv4(ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr));
      } else if (pass == 1 && i->ifa_addr->sa_family == AF_INET6) {
        std::memcpy(g.raw.data(), &reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr, 16);
        if (is_link_local(g)) continue;
      } else {
        continue;
      }
      if (std::any_of(all.begin(), all.end(), [&](const Candidate& c) { return c.name == i->ifa_name; })) continue;
      all.push_back(Candidate{i->ifa_name, if_nametoindex(i->ifa_name), (i->ifa_flags & IFF_LOOPBACK) != 0, g});
    }
  freeifaddrs(list);
  return order_interfaces(std::move(all), default_route_interface(), only);
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

// The host's loopback listeners. Each uroce process is a NIC with an address of its own, while
// on a host 127.0.0.1 (any of 127/8) and ::1 name the host itself: with the kernel's rdma_cm a
// listener bound there is reached from every process. A uroce listener bound to a loopback or a
// wildcard address announces itself with an abstract UNIX socket named after its port and its
// NIC's address (the kernel drops the name with the last process holding it, so nothing goes
// stale); a client whose loopback destination is not that NIC finds it in /proc/net/unix.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "compat/cma/cma.hpp"

namespace uroce::compat::cma {

bool is_loopback(const Gid& g) { return (g.ipv4() && (*g.ipv4() >> 24) == 127) || g == *Gid::parse("::1"); }
bool is_wildcard(const Gid& g) { return g == Gid{} || (g.ipv4() && *g.ipv4() == 0); }

namespace {

constexpr const char* kPrefix = "uroce-cm/";

// "uroce-cm/<port space>/<port>/<bound address>/<NIC address>"
std::string name_of(uint16_t ps, uint16_t port, const Gid& bound, const Gid& nic) {
  return kPrefix + std::to_string(ps) + "/" + std::to_string(port) + "/" + ip_string(bound) + "/" + ip_string(nic);
}

}  // namespace

int announce_listener(uint16_t ps, uint16_t port, const Gid& bound, const Gid& nic) {
  if (!is_loopback(bound) && !is_wildcard(bound)) return -1;
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::string name = name_of(ps, port, bound, nic);
  if (name.size() + 1 > sizeof a.sun_path) {
    close(fd);
    return -1;
  }
  std::memcpy(a.sun_path + 1, name.data(), name.size());  // sun_path[0] = 0: abstract
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), socklen_t(offsetof(sockaddr_un, sun_path) + 1 + name.size())) != 0) {
    close(fd);  // the same listener announced twice (a forked copy): the first name serves
    return -1;
  }
  return fd;
}

// The NIC at dst itself listening on that port wins (no redirection); then a listener bound to
// exactly dst; then a wildcard listener, if only one process has one (with the kernel a second
// wildcard bind of the port would have failed; here the processes are many NICs).
std::optional<Gid> find_listener(uint16_t ps, uint16_t port, const Gid& dst) {
  if (!is_loopback(dst)) return std::nullopt;
  std::ifstream in("/proc/net/unix");
  std::string line, want = std::string("@") + kPrefix + std::to_string(ps) + "/" + std::to_string(port) + "/";
  std::optional<Gid> exact, any;
  int wildcards = 0;
  while (std::getline(in, line)) {
    auto at = line.find(want);
    if (at == std::string::npos) continue;
    std::istringstream rest(line.substr(at + want.size()));
    std::string bound_s, nic_s;
    if (!std::getline(rest, bound_s, '/') || !std::getline(rest, nic_s)) continue;
    auto bound = Gid::parse(bound_s), nic = Gid::parse(nic_s);
    if (!bound || !nic || nic->ipv4().has_value() != dst.ipv4().has_value()) continue;
    if (*nic == dst && (*bound == dst || is_wildcard(*bound))) return dst;
    if (*bound == dst) exact = nic;
    else if (is_wildcard(*bound) && *nic != any.value_or(Gid{})) {
      any = nic;
      ++wildcards;
    }
  }
  if (exact) return exact;
  if (wildcards == 1) return any;
  return std::nullopt;
}

}  // namespace uroce::compat::cma

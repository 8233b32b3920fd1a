// The host's loopback listeners. Each uroce process is a NIC with an address of its own, while
// on a host 127.0.0.1 (any of 127/8) and ::1 name the host itself: with the kernel's rdma_cm a
// listener bound there is reached from every process. A uroce listener bound to a loopback or a
// wildcard address announces itself with an abstract UNIX stream socket named after its port
// and its NIC's address (the kernel drops the name with the last process holding it, so nothing
// goes stale); a client whose loopback destination is not that NIC finds it in /proc/net/unix.
// Any process may make such a name, so a client believes one only if its maker is of the
// client's user or root (SO_PEERCRED of a connection to it), and a listener whose name would
// conflict with another NIC's is refused, as the kernel refuses a second bind of a port.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "compat/cma/cma.hpp"

namespace uroce::compat::cma {

bool is_loopback(const Gid& g) { return (g.ipv4() && (*g.ipv4() >> 24) == 127) || g == *Gid::parse("::1"); }
bool is_wildcard(const Gid& g) { return g == Gid{} || (g.ipv4() && *g.ipv4() == 0); }

namespace {

constexpr const char* kPrefix = "uroce-cm/";
constexpr unsigned long kAcceptCon = 0x10000;  // /proc/net/unix's flag of a listening socket

// "uroce-cm/<port space>/<port>/<bound address>/<NIC address>"
std::string name_of(uint16_t ps, uint16_t port, const Gid& bound, const Gid& nic) {
  return kPrefix + std::to_string(ps) + "/" + std::to_string(port) + "/" + ip_string(bound) + "/" + ip_string(nic);
}

// The abstract address of a name; 0 if it does not fit.
socklen_t address_of(const std::string& name, sockaddr_un& a) {
  a = {};
  a.sun_family = AF_UNIX;
  if (name.size() + 1 > sizeof a.sun_path) return 0;
  std::memcpy(a.sun_path + 1, name.data(), name.size());  // sun_path[0] = 0: abstract
  return socklen_t(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

struct Announced {
  std::string name;
  unsigned long inode = 0;
  Gid bound, nic;
};

// The listening sockets named for the port (a name also shows on each connection queued on it).
std::vector<Announced> announced(uint16_t ps, uint16_t port) {
  std::ifstream in("/proc/net/unix");
  std::string line, want = kPrefix + std::to_string(ps) + "/" + std::to_string(port) + "/";
  std::vector<Announced> out;
  while (std::getline(in, line)) {
    // Num: RefCount Protocol Flags Type St Inode Path
    std::istringstream f(line);
    std::string num, path;
    unsigned long ref, proto, flags, type, st, inode;
    if (!(f >> num >> std::hex >> ref >> proto >> flags >> type >> st >> std::dec >> inode >> path)) continue;
    if (!(flags & kAcceptCon) || path.size() < 1 + want.size() || path.compare(1, want.size(), want) != 0) continue;
    std::istringstream rest(path.substr(1 + want.size()));
    std::string bound_s, nic_s;
    if (!std::getline(rest, bound_s, '/') || !std::getline(rest, nic_s)) continue;
    auto bound = Gid::parse(bound_s), nic = Gid::parse(nic_s);
    if (bound && nic) out.push_back({path.substr(1), inode, *bound, *nic});
  }
  return out;
}

// Whether our user or root made the listening socket: the credentials it had at listen(), as a
// connection to it reads them. Kept per socket (name and inode; mu held), so that a burst of
// connects asks once and does not fill its queue.
bool believed(const Announced& a) {
  static std::map<std::pair<std::string, unsigned long>, bool> known;
  auto it = known.find({a.name, a.inode});
  if (it != known.end()) return it->second;
  bool ok = false;
  sockaddr_un addr;
  socklen_t len = address_of(a.name, addr);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd >= 0 && len && connect(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0) {
    ucred cred{};
    socklen_t n = sizeof cred;
    ok = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &n) == 0 && (cred.uid == geteuid() || cred.uid == 0);
  }
  if (fd >= 0) close(fd);
  if (known.size() >= 1024) known.clear();
  known[{a.name, a.inode}] = ok;
  return ok;
}

}  // namespace

int announce_listener(uint16_t ps, uint16_t port, const Gid& bound, const Gid& nic) {
  if (!is_loopback(bound) && !is_wildcard(bound)) return -1;
  sockaddr_un a;
  socklen_t len = address_of(name_of(ps, port, bound, nic), a);
  if (!len) return -1;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(fd, SOMAXCONN) != 0) {
    close(fd);  // the same listener announced twice (a forked copy): the first name serves
    return -1;
  }
  // As the kernel's rdma_cm binds ports: a wildcard listener excludes every other of the port,
  // an address excludes itself. Named first, checked then: of two racing, neither misses the
  // other. Every user's names count here (first come, as with the kernel).
  for (const Announced& o : announced(ps, port))
    if (o.nic != nic && (is_wildcard(o.bound) || is_wildcard(bound) || o.bound == bound)) {
      close(fd);
      return -EADDRINUSE;
    }
  return fd;
}

// The NIC at dst itself listening on that port wins (no redirection); then a listener bound to
// exactly dst; then a wildcard listener, if only one NIC has one. Names another user made are
// not there.
std::optional<Gid> find_listener(uint16_t ps, uint16_t port, const Gid& dst) {
  if (!is_loopback(dst)) return std::nullopt;
  std::optional<Gid> exact;
  std::set<Gid> wildcards;
  for (const Announced& o : announced(ps, port)) {
    if (o.nic.ipv4().has_value() != dst.ipv4().has_value()) continue;
    if (o.bound != dst && !is_wildcard(o.bound)) continue;
    if (!believed(o)) continue;
    if (o.nic == dst) return dst;
    if (o.bound == dst) exact = o.nic;
    else wildcards.insert(o.nic);
  }
  if (exact) return exact;
  if (wildcards.size() == 1) return *wildcards.begin();
  return std::nullopt;
}

void take_lookups(int fd) {
  for (int c; (c = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) close(c);
}

}  // namespace uroce::compat::cma

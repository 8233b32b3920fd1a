// The process's device for rdma_cm, the addresses ids name, and the router thread that hands the
// CM's events to ids.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "compat/cma/cma.hpp"
#include "compat/objects.hpp"

extern "C" ibv_context* uroce_open_context(const char* name, const char* addr);

namespace uroce::compat::cma {

Registry& registry() {
  static auto* r = new Registry;  // never destroyed: the router may run while the process exits
  return *r;
}

namespace {
std::mutex g_dev_mu;
std::map<std::string, CmDevice*> g_devs;  // by device name; never freed (see CmDevice)
pid_t g_dev_pid = 0;

// A process that exits with connections up disconnects them, as the kernel does for the ids of
// a process that is gone: the peers hear a DREQ instead of waiting out their timeouts.
void disconnect_all() {
  std::lock_guard g(registry().mu);
  std::lock_guard d(g_dev_mu);
  if (g_dev_pid != getpid()) return;
  for (Id* id : registry().ids)
    if (id->comm && id->dev && (id->state == State::Connected || id->state == State::Accepted)) {
      (void)id->dev->cm->disconnect(*id->comm);
      id->state = State::Disconnecting;
    }
}

void route(CmDevice* d) {
  auto lookups_taken = std::chrono::steady_clock::now();
  for (;;) {
    auto e = d->cm->wait(100);
    std::lock_guard g(registry().mu);
    // Clients that checked who announced a loopback listener wait in its name's queue
    // (loopback.cpp): emptied every 100 ms, it never fills.
    if (auto now = std::chrono::steady_clock::now(); now - lookups_taken >= std::chrono::milliseconds(100)) {
      lookups_taken = now;
      for (Id* id : registry().ids)
        if (id->announce_fd >= 0 && id->dev == d) take_lookups(id->announce_fd);
    }
    if (e) dispatch(*d, *e);
  }
}
}  // namespace

CmDevice* device(std::string name, const std::string& addr) {
  std::lock_guard g(g_dev_mu);
  if (g_dev_pid != getpid()) {  // a forked child: the parent's threads did not come along, so it opens its own
    g_devs.clear();
    g_dev_pid = getpid();
  }
  if (name.empty()) {
    const auto all = Device::list();
    if (all.empty()) {
      errno = ENODEV;
      return nullptr;
    }
    name = all.front().name;
  }
  if (auto it = g_devs.find(name); it != g_devs.end()) return it->second;
  auto* d = new CmDevice;
  d->verbs = uroce_open_context(name.c_str(), addr.c_str());
  if (!d->verbs) {
    delete d;
    return nullptr;
  }
  d->dev = uctx(d->verbs)->dev;
  d->pd = ibv_alloc_pd(d->verbs);
  auto cm = ConnectionManager::open(*d->dev);
  if (!d->pd || !cm) {
    errno = cm ? errno : cm.error().code;
    if (d->pd) ibv_dealloc_pd(d->pd);
    ibv_close_device(d->verbs);
    delete d;
    return nullptr;
  }
  d->cm = std::move(*cm);
  d->router = std::thread(route, d);
  d->router.detach();
  g_devs[name] = d;
  static bool at_exit = std::atexit(disconnect_all) == 0;  // runs before libibverbs' flush
  (void)at_exit;
  return d;
}

std::vector<CmDevice*> all_devices(bool loopback) {
  std::vector<CmDevice*> out;
  for (const auto& info : Device::list()) {
    loopback &= !info.loopback;
    if (CmDevice* d = device(info.name, "")) out.push_back(d);
  }
  const int saved = errno;
  if (loopback)
    if (CmDevice* d = device("uroce_lo", "")) out.push_back(d);
  errno = saved;  // loopback's is extra: its absence (UROCE_DEVICES leaves it out) fails nothing
  return out;
}

bool device_has(const CmDevice& d, const Gid& gid) {
  uint32_t n = d.dev->query_port().gid_tbl_len;
  for (uint32_t i = 0; i < n; ++i)
    if (auto g = d.dev->query_gid(int(i)); g && *g == gid) return true;
  return false;
}

std::string local_address_for(const sockaddr* dst) {
  auto gid = gid_of(dst);
  if (!gid) return "";
  if (is_loopback(*gid)) return gid->ipv4() ? "127.0.0.1" : "::1";
  // Elsewhere, the source address the kernel's routing table picks for dst.
  int s = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return "";
  sockaddr_storage probe{};
  set_sockaddr(probe, *gid, 4791);
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  std::string out;
  if (connect(s, reinterpret_cast<sockaddr*>(&probe), sockaddr_len(dst)) == 0 &&
      getsockname(s, reinterpret_cast<sockaddr*>(&local), &len) == 0)
    if (auto g = gid_of(reinterpret_cast<sockaddr*>(&local))) out = ip_string(*g);
  close(s);
  return out;
}

std::string ip_string(const Gid& gid) {
  char buf[INET6_ADDRSTRLEN];
  if (auto v4 = gid.ipv4()) {
    in_addr a{htonl(*v4)};
    return inet_ntop(AF_INET, &a, buf, sizeof buf);
  }
  return inet_ntop(AF_INET6, gid.raw.data(), buf, sizeof buf);
}

std::optional<Gid> gid_of(const sockaddr* sa) {
  if (!sa) return std::nullopt;
  if (sa->sa_family == AF_INET)
    return Gid::from_ipv4(ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr));
  if (sa->sa_family == AF_INET6) {
    Gid g;
    std::memcpy(g.raw.data(), &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, 16);
    return g;
  }
  return std::nullopt;
}

uint16_t port_of(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  return 0;
}

void set_sockaddr(sockaddr_storage& out, const Gid& gid, uint16_t port) {
  out = {};
  if (auto v4 = gid.ipv4()) {
    auto* s = reinterpret_cast<sockaddr_in*>(&out);
    s->sin_family = AF_INET;
    s->sin_addr.s_addr = htonl(*v4);
    s->sin_port = htons(port);
  } else {
    auto* s = reinterpret_cast<sockaddr_in6*>(&out);
    s->sin6_family = AF_INET6;
    std::memcpy(&s->sin6_addr, gid.raw.data(), 16);
    s->sin6_port = htons(port);
  }
}

socklen_t sockaddr_len(const sockaddr* sa) {
  return sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

}  // namespace uroce::compat::cma

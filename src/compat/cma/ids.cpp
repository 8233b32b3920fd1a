// rdma_cm ids: creation, addresses and ports, route, listening, channels and options. A port is
// taken per port space within the process; the device (and so the address) is the one of the
// bound address's interface, or of the route to the peer, opened where the first id needs it.
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <utility>

#include "compat/cma/cma.hpp"

namespace uroce::compat::cma {
namespace {

constexpr int kMaxBacklog = 1024;  // the kernel's net.rdma_ucm.max_backlog


bool is_any(const sockaddr* sa) {
  auto g = gid_of(sa);
  return !g || is_wildcard(*g);
}

bool is_loopback(const sockaddr* sa) {
  auto g = gid_of(sa);
  return g && cma::is_loopback(*g);
}

// Takes a port of the id's port space (mu held): `want`, or a free ephemeral one for 0.
int take_port(Id* id, uint16_t want) {
  auto& ports = registry().ports;
  int ps = id->id.ps;
  if (!want) {
    static std::mt19937 rng(std::random_device{}());
    for (int tries = 0; tries < 1000 && !want; ++tries) {
      auto p = uint16_t(32768 + rng() % (61000 - 32768));
      if (!ports.count({ps, p})) want = p;
    }
    if (!want) return EADDRNOTAVAIL;
  } else if (ports.count({ps, want})) {
    return EADDRINUSE;
  }
  ports[{ps, want}] = id;
  id->port = want;
  return 0;
}

void release_port(Id* id) {
  auto& ports = registry().ports;
  auto it = ports.find({int(id->id.ps), id->port});
  if (it != ports.end() && it->second == id) ports.erase(it);
}

// Whether the device has an address of peer's IP version (the GID a connection to it takes).
bool serves_family(const CmDevice& d, const Gid& peer) {
  auto local = d.dev->query_gid(d.dev->gid_index_for(peer));
  return local && local->ipv4().has_value() == peer.ipv4().has_value();
}

// The process's device, checked against the id's bound address and the peer's IP version.
int use_device(Id* id, const sockaddr* dst) {
  const sockaddr* src = &id->id.route.addr.src_addr;
  bool specific = id->state != State::Idle && !is_any(src);
  if (!id->dev) {
    // The device of the bound address's interface (a network address's device is the host NIC
    // every process shares, so taking it takes nothing from anyone), else of the route to the
    // first peer, else the first device.
    const std::string where = specific ? ip_string(*gid_of(src)) : dst ? local_address_for(dst) : "";
    std::string name = where.empty() ? "" : Device::name_for(where);
    // Loopback where lo has no listed device: a bind there fails as the kernel's does (ENODEV).
    // A peer there is this host: uroce goes further than the kernel (an address error) and
    // reaches it by the first device where that is shared and has an address of the peer's
    // family (the request then goes to that address, where the host's listeners are), else by
    // loopback's device, unlisted but there.
    CmDevice* first = nullptr;
    if (!specific && dst && is_loopback(dst) && name.empty()) {
      const char* sh = std::getenv("UROCE_SHARED");
      if (!sh || std::strcmp(sh, "0") != 0) first = device("", "");
      if (!first || !serves_family(*first, *gid_of(dst))) name = "uroce_lo";
    }
    if (!where.empty() && name.empty() && !first)
      return specific ? (is_loopback(src) ? ENODEV : EADDRNOTAVAIL) : ENETUNREACH;
    // Opened there, unless UROCE_ADDR places that device, or the loopback device is only on
    // the way to a peer (it then takes a 127.0.0.x of its own, or ::1).
    const char* env = std::getenv("UROCE_ADDR");
    const bool placed = env && *env && Device::name_for(env) == name;
    const bool passing = !specific && dst && is_loopback(dst) && dst->sa_family == AF_INET;
    CmDevice* d = first && name.empty() ? first : device(name, placed || passing ? "" : where);
    // Another process's NIC holds that loopback address: any loopback address names this host.
    if (!d && errno == EADDRINUSE && specific && is_loopback(src)) d = device(name, "");
    if (!d) return errno ? errno : ENODEV;
    // A loopback address names whichever device the host has, as the kernel's rdma_cm binds it.
    if (specific && !device_has(*d, *gid_of(src)) && !is_loopback(src)) return EADDRNOTAVAIL;
    id->dev = d;
    if (specific || dst) {
      id->id.verbs = d->verbs;
      if (!id->id.pd) id->id.pd = d->pd;  // as librdmacm: the device's PD, for QPs and AHs made without one
    }
  }
  if (dst) {
    Gid peer = *gid_of(dst);
    auto local = id->dev->dev->query_gid(id->dev->dev->gid_index_for(peer));
    if (!local || local->ipv4().has_value() != peer.ipv4().has_value()) return EADDRNOTAVAIL;
    id->id.verbs = id->dev->verbs;
    if (!id->id.pd) id->id.pd = id->dev->pd;
  }
  return 0;
}

void fill_path(Id* id) {
  ibv_sa_path_rec& p = id->path;
  const rdma_ib_addr& a = id->id.route.addr.addr.ibaddr;
  p = {};
  p.dgid = a.dgid;
  p.sgid = a.sgid;
  p.hop_limit = 64;
  p.traffic_class = id->tos;
  p.reversible = 1;
  p.numb_path = 1;
  p.pkey = a.pkey;
  p.mtu_selector = 2;  // exactly
  p.mtu = uint8_t(id->dev->dev->query_port().active_mtu);
  p.rate_selector = 2;
  p.rate = IBV_RATE_25_GBPS;
  p.packet_life_time_selector = 2;
  id->id.route.path_rec = &p;
  id->id.route.num_paths = 1;
}

}  // namespace
}  // namespace uroce::compat::cma

using namespace uroce;
using namespace uroce::compat::cma;

extern "C" {

int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** out, void* context, rdma_port_space ps) {
  if (!out || (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IB)) return fail(out ? EPROTONOSUPPORT : EINVAL);
  auto* id = new Id;
  id->sync = !channel;
  if (!channel) {
    Channel* c = new_channel();
    if (!c) {
      delete id;
      return -1;
    }
    channel = &c->ch;
  }
  id->id.channel = channel;
  id->id.context = context;
  id->id.ps = ps;
  id->id.port_num = 1;
  id->id.qp_type = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
  std::lock_guard g(registry().mu);
  registry().ids.insert(id);
  *out = &id->id;
  return 0;
}

int rdma_destroy_id(rdma_cm_id* cid) {
  if (!cid) return fail(EINVAL);
  Id* id = from(cid);
  if (cid->event) rdma_ack_cm_event(std::exchange(cid->event, nullptr));
  {
    auto& r = registry();
    std::unique_lock g(r.mu);
    if (!r.ids.count(id)) return fail(EINVAL);
    // As librdmacm's: it returns once the program has acked every event it took for this id.
    r.acked.wait(g, [&] { return id->events_out == 0; });
    ConnectionManager* cm = id->dev ? id->dev->cm.get() : nullptr;
    if (id->state == State::Listening) {
      cm->unlisten(id->service_id);
      for (CmDevice* d : id->also) d->cm->unlisten(id->service_id);
    }
    if (id->announce_fd >= 0) close(id->announce_fd);
    if (id->comm && cm) {
      bool sends = id->state == State::Requested || id->state == State::Connected || id->state == State::Accepted;
      if (id->state == State::Requested && cid->qp_type != IBV_QPT_UD) (void)cm->reject(*id->comm, kRejConsumer);
      // An unanswered SIDR_REQ is refused, as the kernel's CM refuses it: the CM stops holding it.
      else if (id->state == State::Requested) (void)cm->sidr_reply(*id->comm, id->offer.peer, 0, 0, 2);
      else if (id->state == State::Connected || id->state == State::Accepted) (void)cm->disconnect(*id->comm);
      if (sends) id->dev->dev->flush(20);  // the REJ, SIDR_REP or DREQ leaves even if the program exits next
      else if (id->state == State::Connecting || id->state == State::Replied) cm->forget(*id->comm);
      r.forget_comm(id);
    }
    release_port(id);
    drop_events(id);
    r.ids.erase(id);
  }
  if (id->sync) rdma_destroy_event_channel(cid->channel);
  delete id;
  return 0;
}

int rdma_bind_addr(rdma_cm_id* cid, sockaddr* addr) {
  if (!cid || !addr) return fail(EINVAL);
  if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) return fail(EAFNOSUPPORT);
  Id* id = from(cid);
  std::lock_guard g(registry().mu);
  if (id->state != State::Idle) return fail(EINVAL);
  std::memcpy(&cid->route.addr.src_storage, addr, sockaddr_len(addr));
  id->state = State::Bound;
  if (!is_any(addr))
    if (int e = use_device(id, nullptr)) {
      id->state = State::Idle;
      return fail(e);
    }
  if (int e = take_port(id, port_of(addr))) {
    id->state = State::Idle;
    return fail(e);
  }
  reinterpret_cast<sockaddr_in*>(&cid->route.addr.src_storage)->sin_port = htons(id->port);  // same offset in sockaddr_in6
  return 0;
}

int rdma_resolve_addr(rdma_cm_id* cid, sockaddr* src, sockaddr* dst, int) {
  if (!cid || !dst || !gid_of(dst)) return fail(EINVAL);
  Id* id = from(cid);
  if (from(cid)->state == State::Idle) {
    sockaddr_storage any{};
    any.ss_family = dst->sa_family;
    if (rdma_bind_addr(cid, src ? src : reinterpret_cast<sockaddr*>(&any))) return -1;
  }
  {
    std::lock_guard g(registry().mu);
    if (id->state != State::Bound) return fail(EINVAL);
    if (int e = use_device(id, dst)) return fail(e);
    Gid peer = *gid_of(dst);
    Gid local = *id->dev->dev->query_gid(id->dev->dev->gid_index_for(peer));
    set_route(id, local, id->port, peer, port_of(dst));
    id->state = State::AddrResolved;
    post(id, RDMA_CM_EVENT_ADDR_RESOLVED);
  }
  return id->sync ? complete(id, RDMA_CM_EVENT_ADDR_RESOLVED) : 0;
}

int rdma_resolve_route(rdma_cm_id* cid, int) {
  if (!cid) return fail(EINVAL);
  Id* id = from(cid);
  {
    std::lock_guard g(registry().mu);
    if (id->state != State::AddrResolved) return fail(EINVAL);
    fill_path(id);
    id->state = State::RouteResolved;
    post(id, RDMA_CM_EVENT_ROUTE_RESOLVED);
  }
  return id->sync ? complete(id, RDMA_CM_EVENT_ROUTE_RESOLVED) : 0;
}

int rdma_listen(rdma_cm_id* cid, int backlog) {
  if (!cid) return fail(EINVAL);
  Id* id = from(cid);
  if (id->state == State::Idle) {
    sockaddr_in any{};
    any.sin_family = AF_INET;
    if (rdma_bind_addr(cid, reinterpret_cast<sockaddr*>(&any))) return -1;
  }
  std::lock_guard g(registry().mu);
  if (id->state != State::Bound) return fail(EINVAL);
  if (int e = use_device(id, nullptr)) return fail(e);
  Gid bound = *gid_of(&cid->route.addr.src_addr);
  auto nic = id->dev->dev->query_gid(id->dev->dev->gid_index_for(bound == Gid{} ? *Gid::parse("::1") : bound));
  int fd = nic ? announce_listener(uint16_t(cid->ps), id->port, bound, *nic) : -1;
  if (fd == -EADDRINUSE) return fail(EADDRINUSE);
  id->service_id = ip_service_id(uint16_t(cid->ps), id->port);
  if (Status s = id->dev->cm->listen(id->service_id, uint64_t(uintptr_t(id))); !s) {
    if (fd >= 0) close(fd);
    return fail(s.error().code);
  }
  // A wildcard listener listens on every device, as the kernel's does: a host on two networks
  // hears its clients on both. The port taken on one of them fails the listen, as a bind would.
  // Loopback's device too where it is not listed: a client of 127.0.0.1 whose own device is not
  // shared comes by it.
  if (is_wildcard(bound))
    for (CmDevice* d : all_devices(true)) {
      if (d == id->dev) continue;
      if (Status s = d->cm->listen(id->service_id, uint64_t(uintptr_t(id))); s) {
        id->also.push_back(d);
      } else if (s.error().code == EADDRINUSE) {
        id->dev->cm->unlisten(id->service_id);
        for (CmDevice* o : std::exchange(id->also, {})) o->cm->unlisten(id->service_id);
        if (fd >= 0) close(fd);
        return fail(EADDRINUSE);
      }
    }
  id->announce_fd = fd;
  // Requests it holds that the program has not taken, at most; as with the kernel's ucma, a
  // backlog of 0 or less, or above the maximum, is the maximum.
  id->backlog = backlog > 0 && backlog < kMaxBacklog ? backlog : kMaxBacklog;
  id->state = State::Listening;
  return 0;
}

int rdma_migrate_id(rdma_cm_id* cid, rdma_event_channel* channel) {
  if (!cid) return fail(EINVAL);
  Id* id = from(cid);
  Channel* to = channel ? from(channel) : new_channel();
  if (!to) return -1;
  rdma_event_channel* old = cid->channel;
  bool was_sync = id->sync;
  {
    std::lock_guard g(registry().mu);
    Channel* c = from(old);
    std::vector<EventBox*> mine;
    std::erase_if(c->queue, [&](EventBox* e) {
      bool m = e->ev.id == cid;
      if (m) mine.push_back(e);
      return m;
    });
    if (!mine.empty() && c->queue.empty()) {
      uint64_t v;
      (void)!read(c->ch.fd, &v, sizeof v);
    }
    cid->channel = &to->ch;
    id->sync = !channel;
    for (EventBox* e : mine) {
      to->queue.push_back(e);
      uint64_t one = 1;
      if (to->queue.size() == 1) (void)!write(to->ch.fd, &one, sizeof one);
    }
  }
  if (was_sync) rdma_destroy_event_channel(old);
  return 0;
}

int rdma_set_option(rdma_cm_id* cid, int level, int optname, void* optval, size_t optlen) {
  if (!cid || !optval) return fail(EINVAL);
  Id* id = from(cid);
  if (level == RDMA_OPTION_ID) {
    switch (optname) {
      case RDMA_OPTION_ID_TOS:
        if (optlen != sizeof(uint8_t)) return fail(EINVAL);
        id->tos = *static_cast<uint8_t*>(optval);
        return 0;
      case RDMA_OPTION_ID_REUSEADDR:
      case RDMA_OPTION_ID_AFONLY: return optlen == sizeof(int) ? 0 : fail(EINVAL);
      case RDMA_OPTION_ID_ACK_TIMEOUT:  // as the kernel's: RC only, a 5-bit exponent
        if (optlen != sizeof(uint8_t) || cid->qp_type != IBV_QPT_RC) return fail(EINVAL);
        id->ack_timeout = std::min<uint8_t>(*static_cast<uint8_t*>(optval), 31);
        return 0;
      default: return fail(ENOSYS);
    }
  }
  if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH) return 0;  // RoCE routes are resolved here
  return fail(ENOSYS);
}

ibv_context** rdma_get_devices(int* num) {
  const auto devs = all_devices();
  auto** list = static_cast<ibv_context**>(calloc(devs.size() + 1, sizeof(ibv_context*)));
  if (!list) return nullptr;
  for (size_t i = 0; i < devs.size(); ++i) list[i] = devs[i]->verbs;
  if (num) *num = int(devs.size());
  return list;
}

void rdma_free_devices(ibv_context** list) { free(list); }

__be16 rdma_get_src_port(rdma_cm_id* id) { return htons(from(id)->port); }

__be16 rdma_get_dst_port(rdma_cm_id* id) {
  const sockaddr* sa = &id->route.addr.dst_addr;
  return sa->sa_family == AF_INET || sa->sa_family == AF_INET6 ? htons(port_of(sa)) : 0;
}

int rdma_notify(rdma_cm_id* id, ibv_event_type) { return id ? 0 : fail(EINVAL); }

}  // extern "C"

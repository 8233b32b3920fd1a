// rdma_cm multicast, for RDMA_PS_UDP ids. RoCE v2 maps an IP multicast address to the group's
// GID one to one (IPv4-mapped), as the kernel's rdma_cm does, and there is no SA to ask: a
// join attaches the id's QP to that GID (the device joins the IP group for it) and reports
// RDMA_CM_EVENT_MULTICAST_JOIN with what a sender needs, an AH to the group, QPN 0xFFFFFF and
// the id's Q_Key. A send-only member is told the same and attaches nothing.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "compat/cma/cma.hpp"

namespace uroce::compat::cma {
namespace {

constexpr uint32_t kMulticastQpn = 0xffffff;

bool is_group(const Gid& g) {
  return g.ipv4() ? (*g.ipv4() >> 28) == 0xe : g.raw[0] == 0xff;  // 224.0.0.0/4, ff00::/8
}

ibv_gid to_ibv(const Gid& g) {
  ibv_gid out;
  std::memcpy(out.raw, g.raw.data(), 16);
  return out;
}

int join(rdma_cm_id* cid, const sockaddr* addr, uint32_t flags, void* context) {
  if (!cid || !addr) return fail(EINVAL);
  auto group = gid_of(addr);
  if (!group || !is_group(*group)) return fail(EINVAL);
  if (flags > RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) return fail(EINVAL);
  Id* id = from(cid);
  {
    std::lock_guard g(registry().mu);
    // As the kernel's: a UD id with an address bound or resolved (which names its device).
    if (!registry().ids.count(id) || !id->dev || cid->qp_type != IBV_QPT_UD) return fail(EINVAL);
  }
  Membership m{*group, {}, context, false};
  set_sockaddr(m.addr, *group, port_of(addr));
  if (cid->qp && flags == RDMA_MC_JOIN_FLAG_FULLMEMBER) {
    ibv_gid mgid = to_ibv(*group);
    if (int e = ibv_attach_mcast(cid->qp, &mgid, 0)) return fail(e);
    m.attached = true;
  }
  {
    std::lock_guard g(registry().mu);
    id->mcast.push_back(m);
    EventBox* b = post(id, RDMA_CM_EVENT_MULTICAST_JOIN);
    set_ah(*id->dev, b->ev.param.ud.ah_attr, *group);
    b->ev.param.ud.qp_num = kMulticastQpn;
    b->ev.param.ud.qkey = id->qkey;
    b->ev.param.ud.private_data = context;  // as librdmacm reports a join: the caller's context
  }
  return id->sync ? complete(id, RDMA_CM_EVENT_MULTICAST_JOIN) : 0;
}

}  // namespace
}  // namespace uroce::compat::cma

using namespace uroce::compat::cma;

extern "C" {

int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
  return join(id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* attr, void* context) {
  if (!attr || !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS)) return fail(EINVAL);
  uint32_t flags = (attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ? attr->join_flags : uint32_t(RDMA_MC_JOIN_FLAG_FULLMEMBER);
  return join(id, attr->addr, flags, context);
}

// EADDRNOTAVAIL for a group the id did not join, as librdmacm answers.
int rdma_leave_multicast(rdma_cm_id* cid, sockaddr* addr) {
  if (!cid || !addr) return fail(EINVAL);
  auto group = gid_of(addr);
  if (!group) return fail(EINVAL);
  Id* id = from(cid);
  Membership m;
  {
    std::lock_guard g(registry().mu);
    auto it = std::find_if(id->mcast.begin(), id->mcast.end(), [&](const Membership& x) { return x.group == *group; });
    if (it == id->mcast.end()) return fail(EADDRNOTAVAIL);
    m = *it;
    id->mcast.erase(it);
  }
  // The QP may have been detached or destroyed by the program meanwhile: nothing left to undo.
  if (m.attached && cid->qp) {
    ibv_gid mgid = to_ibv(m.group);
    (void)ibv_detach_mcast(cid->qp, &mgid, 0);
  }
  return 0;
}

}  // extern "C"

// rdma_cm multicast, for RDMA_PS_UDP ids. RoCE v2 maps an IP multicast address to the group's
// GID one to one (IPv4-mapped), as the kernel's rdma_cm does, and there is no SA to ask: a
// join is granted at once with RDMA_CM_EVENT_MULTICAST_JOIN, which carries what a sender needs
// (an AH to the group, QPN 0xFFFFFF, the id's Q_Key). As librdmacm does, the id's QP (if it
// has one when the program takes that event) is attached then, unless the member is send-only,
// and detached at the leave.
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
    // As the kernel's: a UD id whose address is bound or resolved, on a device.
    if (!registry().ids.count(id) || !id->dev || cid->qp_type != IBV_QPT_UD ||
        (id->state != State::Bound && id->state != State::AddrResolved))
      return fail(EINVAL);
    const bool send_only = flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
    id->mcast.push_back({*group, port_of(addr), send_only});
    EventBox* b = post(id, RDMA_CM_EVENT_MULTICAST_JOIN);
    set_ah(*id->dev, b->ev.param.ud.ah_attr, *group);
    b->ev.param.ud.qp_num = kMulticastQpn;
    b->ev.param.ud.qkey = id->qkey;
    b->ev.param.ud.private_data = context;  // as librdmacm reports a join: the caller's context
    if (!send_only) b->attach = *group;
  }
  return id->sync ? complete(id, RDMA_CM_EVENT_MULTICAST_JOIN) : 0;
}

}  // namespace

void deliver_join(EventBox* e) {
  rdma_cm_id* cid = e->ev.id;
  if (!cid->qp) return;  // a QP made later is the program's to attach
  ibv_gid mgid = to_ibv(*e->attach);
  if (int err = ibv_attach_mcast(cid->qp, &mgid, 0)) {
    e->ev.status = -err;
    e->ev.event = RDMA_CM_EVENT_MULTICAST_ERROR;
  }
}

}  // namespace uroce::compat::cma

using namespace uroce::compat::cma;

extern "C" {

int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
  return join(id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

// librdmacm's: the address and the join flags are both required.
int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* attr, void* context) {
  const uint32_t need = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  if (!attr || (attr->comp_mask & need) != need) return fail(EINVAL);
  return join(id, attr->addr, attr->join_flags, context);
}

// The membership of the same address and port; EADDRNOTAVAIL if there is none, as librdmacm.
int rdma_leave_multicast(rdma_cm_id* cid, sockaddr* addr) {
  if (!cid || !addr) return fail(EINVAL);
  auto group = gid_of(addr);
  if (!group) return fail(EINVAL);
  Id* id = from(cid);
  Membership m;
  {
    std::lock_guard g(registry().mu);
    auto it = std::find_if(id->mcast.begin(), id->mcast.end(),
                           [&](const Membership& x) { return x.group == *group && x.port == port_of(addr); });
    if (it == id->mcast.end()) return fail(EADDRNOTAVAIL);
    m = *it;
    id->mcast.erase(it);
  }
  // As librdmacm: a full member's QP is detached (not attached, as when the QP came after the
  // join, it answers EINVAL, ignored). The QP must be the id's: one destroyed with
  // ibv_destroy_qp behind rdma_cm's back is gone, and so is this call's ground.
  if (!m.send_only && cid->qp) {
    ibv_gid mgid = to_ibv(m.group);
    (void)ibv_detach_mcast(cid->qp, &mgid, 0);
  }
  return 0;
}

}  // extern "C"

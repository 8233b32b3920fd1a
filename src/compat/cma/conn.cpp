// Connecting ids: REQ/REP/RTU for RC and UC, SIDR for UD, with the RDMA IP CM header in front of
// the program's private data, and the limits librdmacm enforces on its length.
#include <cerrno>
#include <random>

#include "compat/cma/cma.hpp"

namespace uroce::compat::cma {
namespace {

// Private data a program may send: the CM message's room, less the IP CM header where it goes.
constexpr size_t kReqUser = 92 - kIpCmHeaderBytes, kSidrReqUser = 216 - kIpCmHeaderBytes;
constexpr size_t kRepUser = 196, kSidrRepUser = 136, kRejUser = 148;


int reject_with(rdma_cm_id* cid, uint16_t reason, const void* private_data, uint8_t private_data_len);

uint32_t random_psn() {
  static std::mt19937 rng(std::random_device{}());
  uint32_t psn;
  do psn = rng() & 0xffffff;
  while (psn == 0);  // 0: not chosen yet
  return psn;
}

std::vector<uint8_t> user_data(const rdma_conn_param* p) {
  if (!p || !p->private_data) return {};
  auto* d = static_cast<const uint8_t*>(p->private_data);
  return {d, d + p->private_data_len};
}

uint8_t clamp_rd_atom(const Id* id, uint8_t v) {
  return uint8_t(std::min<uint32_t>(v, id->dev->dev->query_device().max_qp_rd_atom));
}

Gid local_gid(const Id* id) { return *gid_of(&id->id.route.addr.src_addr); }
Gid peer_gid(const Id* id) { return id->wire_peer ? *id->wire_peer : *gid_of(&id->id.route.addr.dst_addr); }
Gid dst_gid(const Id* id) { return *gid_of(&id->id.route.addr.dst_addr); }

// A loopback destination is the host: the request goes to the NIC whose listener has that port
// (found when connecting, since the listener may come up after the address was resolved), else,
// from a device of the host's network (shared by its processes), to that device's own address,
// where every listener of the host on it is.
void find_peer_nic(Id* id) {
  id->wire_peer = find_listener(uint16_t(id->id.ps), port_of(&id->id.route.addr.dst_addr), dst_gid(id));
  if (!id->wire_peer && is_loopback(dst_gid(id)) && !is_loopback(local_gid(id))) id->wire_peer = local_gid(id);
  if (id->wire_peer && *id->wire_peer == dst_gid(id)) id->wire_peer.reset();
}

int connect_ud(Id* id, const rdma_conn_param* p) {
  if (p && p->private_data_len > kSidrReqUser) return EINVAL;
  auto data = ip_cm_private_data(local_gid(id), dst_gid(id), id->port, user_data(p));
  uint16_t dport = port_of(&id->id.route.addr.dst_addr);
  auto r = id->dev->cm->sidr_request(peer_gid(id), id->dev->dev->gid_index_for(peer_gid(id)),
                                     ip_service_id(uint16_t(id->id.ps), dport), std::move(data));
  if (!r) return r.error().code;
  id->comm = *r;
  return 0;
}

int connect_rc(Id* id, const rdma_conn_param* p) {
  if (p && p->private_data_len > kReqUser) return EINVAL;
  CmConnectParams c;
  c.peer = peer_gid(id);
  c.service_id = ip_service_id(uint16_t(id->id.ps), port_of(&id->id.route.addr.dst_addr));
  c.type = id->id.qp_type == IBV_QPT_UC ? QpType::UC : QpType::RC;
  c.qpn = id->id.qp ? id->id.qp->qp_num : p ? p->qp_num : 0;
  c.srq = id->id.qp ? id->id.qp->srq != nullptr : p && p->srq;
  c.rq_psn = id->rq_psn = random_psn();
  c.mtu = id->dev->dev->query_port().active_mtu;
  c.responder_resources = id->ours.responder_resources;
  c.initiator_depth = id->ours.initiator_depth;
  c.retry_count = id->ours.retry_count;
  c.rnr_retry_count = id->ours.rnr_retry_count;
  c.traffic_class = id->tos;
  c.private_data = ip_cm_private_data(local_gid(id), dst_gid(id), id->port, user_data(p));
  const ibv_ece ece = local_ece(id);
  c.ece_vendor_id = ece.vendor_id;
  c.ece_options = ece.options;
  auto r = id->dev->cm->connect(c);
  if (!r) return r.error().code;
  id->comm = *r;
  return 0;
}

int accept_rc(Id* id, const rdma_conn_param* p) {
  if (p && p->private_data_len > kRepUser) return EINVAL;
  rq_psn_of(id);
  if (id->id.qp && ready_qp(id)) return errno;
  CmAcceptParams a;
  a.qpn = id->id.qp ? id->id.qp->qp_num : p ? p->qp_num : 0;
  a.srq = id->id.qp ? id->id.qp->srq != nullptr : p && p->srq;
  a.rq_psn = id->rq_psn;
  a.responder_resources = id->ours.responder_resources;
  a.initiator_depth = id->ours.initiator_depth;
  a.rnr_retry_count = id->ours.rnr_retry_count;
  a.private_data = user_data(p);
  if (id->offer.ece_vendor_id) {  // ECE answers ECE: a peer that offered none gets none
    const ibv_ece ece = local_ece(id);
    a.ece_vendor_id = ece.vendor_id;
    a.ece_options = ece.options;
  }
  if (Status s = id->dev->cm->accept(*id->comm, a); !s) return s.error().code;
  return 0;
}

}  // namespace

ibv_ece local_ece(Id* id) {
  ibv_ece e{};
  if (!id->id.qp) return id->local_ece;
  if (ibv_query_ece(id->id.qp, &e) != 0) e = {};  // the provider has no ECE
  return e;
}

void apply_peer_ece(Id* id) {
  if (!id->id.qp || !id->offer.ece_vendor_id) return;
  ibv_ece e{id->offer.ece_vendor_id, id->offer.ece_options, 0};
  (void)ibv_set_ece(id->id.qp, &e);  // not ours, or not now: the QP keeps its own
}

uint32_t rq_psn_of(Id* id) {
  if (!id->rq_psn) id->rq_psn = random_psn();
  return id->rq_psn;
}

}  // namespace uroce::compat::cma

using namespace uroce;
using namespace uroce::compat::cma;

extern "C" {

int rdma_connect(rdma_cm_id* cid, rdma_conn_param* p) {
  if (!cid) return fail(EINVAL);
  Id* id = from(cid);
  {
    auto& r = registry();
    std::lock_guard g(r.mu);
    if (id->state != State::RouteResolved) return fail(EINVAL);
    if (p) {
      id->ours = *p;
      id->ours.responder_resources = clamp_rd_atom(id, p->responder_resources);
      id->ours.initiator_depth = clamp_rd_atom(id, p->initiator_depth);
    } else {
      id->ours = {};
      id->ours.retry_count = id->ours.rnr_retry_count = 7;
    }
    find_peer_nic(id);
    int e = cid->qp_type == IBV_QPT_UD ? connect_ud(id, p) : connect_rc(id, p);
    if (e) return fail(e);
    id->state = State::Connecting;
    r.by_comm[{id->dev, *id->comm}] = id;
  }
  return id->sync ? complete(id, RDMA_CM_EVENT_ESTABLISHED) : 0;
}

int rdma_accept(rdma_cm_id* cid, rdma_conn_param* p) {
  if (!cid) return fail(EINVAL);
  Id* id = from(cid);
  {
    std::lock_guard g(registry().mu);
    if (id->state != State::Requested) return fail(EINVAL);
    if (cid->qp_type == IBV_QPT_UD) {
      if (p && p->private_data_len > kSidrRepUser) return fail(EINVAL);
      uint32_t qpn = cid->qp ? cid->qp->qp_num : p ? p->qp_num : 0;
      if (Status s = id->dev->cm->sidr_reply(*id->comm, id->offer.peer, qpn, id->qkey, 0, user_data(p)); !s)
        return fail(s.error().code);
      id->state = State::Connected;
      return 0;
    }
    // Without parameters, the resources the peer asked for.
    id->ours = p ? *p : rdma_conn_param{};
    id->ours.responder_resources = clamp_rd_atom(id, p ? p->responder_resources : id->offer.initiator_depth);
    id->ours.initiator_depth = clamp_rd_atom(id, p ? p->initiator_depth : id->offer.responder_resources);
    id->ours.rnr_retry_count = p ? p->rnr_retry_count : 7;
    if (int e = accept_rc(id, p)) return fail(e);
    id->state = State::Accepted;
  }
  return id->sync ? complete(id, RDMA_CM_EVENT_ESTABLISHED) : 0;
}

int rdma_reject(rdma_cm_id* cid, const void* private_data, uint8_t private_data_len) {
  return reject_with(cid, kRejConsumer, private_data, private_data_len);
}

// What the kernel's rdma_cm sends for it: REJ reason 35, "vendor option not supported".
int rdma_reject_ece(rdma_cm_id* cid, const void* private_data, uint8_t private_data_len) {
  return reject_with(cid, kRejVendorOptionNotSupported, private_data, private_data_len);
}

}  // extern "C"

namespace uroce::compat::cma {
namespace {
int reject_with(rdma_cm_id* cid, uint16_t reason, const void* private_data, uint8_t private_data_len) {
  if (!cid) return fail(EINVAL);
  Id* id = from(cid);
  auto& r = registry();
  std::lock_guard g(r.mu);
  if (id->state != State::Requested) return fail(EINVAL);
  auto* d = static_cast<const uint8_t*>(private_data);
  std::vector<uint8_t> data(d, d + (d ? private_data_len : 0));
  bool ud = cid->qp_type == IBV_QPT_UD;
  if (data.size() > (ud ? kSidrRepUser : kRejUser)) return fail(EINVAL);
  // A UD request is refused with SIDR status 2, "rejected".
  Status s = ud ? id->dev->cm->sidr_reply(*id->comm, id->offer.peer, 0, 0, 2, std::move(data))
                : id->dev->cm->reject(*id->comm, reason, std::move(data));
  r.forget_comm(id);
  id->state = State::Closed;
  if (!s) return fail(s.error().code);
  // Programs often exit right after refusing (forked test servers leave by _exit, without atexit):
  // the REJ or SIDR_REP leaves before the call returns, as the kernel's would whatever follows.
  id->dev->dev->flush(20);
  return 0;
}
}  // namespace
}  // namespace uroce::compat::cma

extern "C" {

int rdma_establish(rdma_cm_id* cid) {
  if (!cid) return fail(EINVAL);
  Id* id = from(cid);
  std::lock_guard g(registry().mu);
  if (id->state != State::Replied) return fail(EINVAL);
  if (Status s = id->dev->cm->establish(*id->comm); !s) return fail(s.error().code);
  id->state = State::Connected;
  return 0;
}

// A synchronous id waits for its DISCONNECTED event, as librdmacm's does: the DREP to our DREQ,
// or the peer's DREQ already answered.
int rdma_disconnect(rdma_cm_id* cid) {
  if (!cid) return fail(EINVAL);
  Id* id = from(cid);
  {
    std::lock_guard g(registry().mu);
    bool connected = id->state == State::Connected || id->state == State::Accepted;
    if (!connected && id->state != State::Disconnecting && id->state != State::Disconnected) return fail(EINVAL);
    qp_to_error(id);
    if (cid->qp_type == IBV_QPT_UD) return 0;
    if (connected) {
      // The peer's DREQ may have crossed ours, its event not yet handed to the id: as with the
      // kernel's rdma_cm that is no error, and DISCONNECTED comes either way.
      (void)id->dev->cm->disconnect(*id->comm);
      id->state = State::Disconnecting;
      id->dev->dev->flush(20);  // on the wire before the call returns: the program may exit next
    }
  }
  return id->sync ? complete(id, RDMA_CM_EVENT_DISCONNECTED) : 0;
}

}  // extern "C"

extern "C" {

// ECE (enhanced connection establishment) agrees on vendor options of the QPs in the REQ and
// REP. An id with a QP offers what ibv_query_ece says (uroce: selective repeat) and applies the
// peer's with ibv_set_ece; these two are for programs that bring their own QPs.
int rdma_set_local_ece(rdma_cm_id* cid, ibv_ece* ece) {
  if (!cid || cid->qp || !ece || !ece->vendor_id || ece->comp_mask) return fail(EINVAL);
  auto& r = registry();
  std::lock_guard g(r.mu);
  from(cid)->local_ece = *ece;
  return 0;
}

int rdma_get_remote_ece(rdma_cm_id* cid, ibv_ece* ece) {
  if (!cid || cid->qp || !ece) return fail(EINVAL);
  auto& r = registry();
  std::lock_guard g(r.mu);
  const Id* id = from(cid);
  *ece = {id->offer.ece_vendor_id, id->offer.ece_options, 0};
  return 0;
}

}  // extern "C"

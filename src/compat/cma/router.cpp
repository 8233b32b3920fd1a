// What each CM event means for an rdma_cm id: a REQ makes a new id on its listener's channel, a
// REP readies the QP and sends the RTU (as librdmacm does on the kernel's CONNECT_RESPONSE), and
// the rest become the events librdmacm reports, with the kernel's statuses.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "compat/cma/cma.hpp"

namespace uroce::compat::cma {

namespace {

Id* find(const CmDevice& d, uint32_t comm) {
  auto& m = registry().by_comm;
  auto it = m.find({&d, comm});
  return it == m.end() ? nullptr : it->second;
}

void finish(Id* id, State s) {
  registry().forget_comm(id);
  id->state = s;
}

void set_conn(EventBox* b, const CmEvent& e, size_t skip) {
  set_conn_data(b, e.private_data, skip);
  rdma_conn_param& c = b->ev.param.conn;
  c.responder_resources = e.responder_resources;
  c.initiator_depth = e.initiator_depth;
  c.flow_control = 1;
  c.retry_count = e.retry_count;
  c.rnr_retry_count = e.rnr_retry_count;
  c.srq = e.srq;
  c.qp_num = e.remote_qpn;
}

void on_request(CmDevice& d, const CmEvent& e) {
  auto& r = registry();
  auto* l = reinterpret_cast<Id*>(e.listener);
  bool ud = e.type == CmEventType::SidrRequest;
  auto hdr = read_ip_cm_private_data(e.private_data);
  auto refuse = [&] {
    if (ud)
      (void)d.cm->sidr_reply(e.id, e.peer, 0, 0, 2);
    else
      (void)d.cm->reject(e.id, kRejConsumer);
  };
  if (!r.ids.count(l) || l->state != State::Listening || !hdr) return refuse();
  // As the kernel's rdma_cm: a listener bound to an address takes the requests for that address
  // (the IP CM header's destination) only, whichever of the host's addresses reached its NIC.
  if (Gid bound = *gid_of(&l->id.route.addr.src_addr); !is_wildcard(bound) && hdr->dst != bound) return refuse();
  // As the kernel's ucma: at most the listener's backlog of requests the program has not taken;
  // and of those one source at most a quarter, or 16 if that is more, so that one peer cannot
  // take it all. Past it a REQ is dropped, not rejected (the peer sends it again), a SIDR_REQ
  // refused, as the kernel's CM does.
  auto [queued, mine] = queued_requests(l, e.peer);
  size_t backlog = size_t(l->backlog), share = std::max(backlog / 4, std::min<size_t>(backlog, 16));
  if (queued >= backlog || mine >= share) {
    ++r.requests_dropped;
    if (ud)
      (void)d.cm->sidr_reply(e.id, e.peer, 0, 0, 2);
    else
      d.cm->forget(e.id);
    return;
  }
  auto* c = new Id;
  c->id.verbs = d.verbs;
  c->id.pd = d.pd;
  c->id.context = l->id.context;
  c->id.ps = l->id.ps;
  c->id.port_num = 1;
  c->id.qp_type = ud ? IBV_QPT_UD : e.qp_type == QpType::UC ? IBV_QPT_UC : IBV_QPT_RC;
  c->dev = &d;
  c->passive = true;
  c->state = State::Requested;
  c->comm = e.id;
  c->offer = e;
  c->port = l->port;
  c->qkey = l->qkey;
  // Connected: the REQ's path's, as the kernel's CM gives the passive side; a SIDR request
  // has no path, and the listener's stays.
  c->tos = ud ? l->tos : e.traffic_class;
  c->sync = l->sync;
  c->id.channel = l->id.channel;
  if (c->sync) c->id.channel = &new_channel(true)->ch;
  set_route(c, hdr->dst, l->port, e.peer, hdr->src_port);
  r.ids.insert(c);
  if (!ud) r.by_comm[{&d, e.id}] = c;
  EventBox* b = post(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0, l);
  if (ud) {
    set_conn_data(b, e.private_data, kIpCmHeaderBytes);
    set_ah(d, b->ev.param.ud.ah_attr, e.peer);
  } else {
    set_conn(b, e, kIpCmHeaderBytes);
  }
}

void on_reply(CmDevice& d, Id* id, const CmEvent& e) {
  if (id->state != State::Connecting) return;
  id->offer = e;
  id->state = State::Replied;
  if (!id->id.qp) {
    set_conn(post(id, RDMA_CM_EVENT_CONNECT_RESPONSE), e, 0);
    return;
  }
  apply_peer_ece(id);  // before RTR, where the QP's options take effect
  if (ready_qp(id) != 0) {
    int err = errno;
    (void)d.cm->reject(*id->comm, kRejConsumer);
    finish(id, State::Closed);
    post(id, RDMA_CM_EVENT_CONNECT_ERROR, -err);
    return;
  }
  (void)d.cm->establish(*id->comm);
  id->state = State::Connected;
  set_conn(post(id, RDMA_CM_EVENT_ESTABLISHED), e, 0);
}

void on_sidr_reply(CmDevice& d, Id* id, const CmEvent& e) {
  if (id->state != State::Connecting) return;
  if (e.sidr_status != 0) {
    finish(id, State::Closed);
    post(id, RDMA_CM_EVENT_UNREACHABLE, e.sidr_status);
    return;
  }
  finish(id, State::Connected);
  EventBox* b = post(id, RDMA_CM_EVENT_ESTABLISHED);
  set_conn_data(b, e.private_data);
  set_ah(d, b->ev.param.ud.ah_attr, e.peer);
  b->ev.param.ud.qp_num = e.remote_qpn;
  b->ev.param.ud.qkey = e.qkey;
}

void on_disconnect(Id* id) {
  if (id->state != State::Connected && id->state != State::Accepted && id->state != State::Disconnecting) return;
  // The QP is left as it is, as the kernel leaves user QPs: rdma_disconnect moves it to ERR.
  finish(id, State::Disconnected);
  post(id, RDMA_CM_EVENT_DISCONNECTED);
}

}  // namespace

void dispatch(CmDevice& d, const CmEvent& e) {
  if (e.type == CmEventType::ConnectRequest || e.type == CmEventType::SidrRequest) return on_request(d, e);
  Id* id = find(d, e.id);
  if (!id) return;  // its id is gone
  switch (e.type) {
    case CmEventType::ConnectReply: return on_reply(d, id, e);
    case CmEventType::SidrReply: return on_sidr_reply(d, id, e);
    case CmEventType::Established:
      // The active side reported ESTABLISHED when it sent the RTU; the passive side now.
      if (id->state == State::Accepted) {
        id->state = State::Connected;
        post(id, RDMA_CM_EVENT_ESTABLISHED);
      }
      return;
    case CmEventType::Rejected:
      finish(id, State::Closed);
      set_conn_data(post(id, RDMA_CM_EVENT_REJECTED, e.reject_reason), e.private_data);
      return;
    case CmEventType::Unreachable:
      finish(id, State::Closed);
      post(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
      return;
    case CmEventType::Disconnected:
    case CmEventType::DisconnectDone: return on_disconnect(id);
    case CmEventType::ConnectRequest:
    case CmEventType::SidrRequest: return;
  }
}

void set_route(Id* id, const Gid& local, uint16_t local_port, const Gid& peer, uint16_t peer_port) {
  rdma_route& r = id->id.route;
  set_sockaddr(r.addr.src_storage, local, local_port);
  set_sockaddr(r.addr.dst_storage, peer, peer_port);
  std::memcpy(r.addr.addr.ibaddr.sgid.raw, local.raw.data(), 16);
  std::memcpy(r.addr.addr.ibaddr.dgid.raw, peer.raw.data(), 16);
  r.addr.addr.ibaddr.pkey = htobe16(0xffff);
}

void set_ah(const CmDevice& d, ibv_ah_attr& ah, const Gid& peer) {
  ah = {};
  ah.is_global = 1;
  std::memcpy(ah.grh.dgid.raw, peer.raw.data(), 16);
  ah.grh.sgid_index = d.dev->gid_index_for(peer);
  ah.grh.hop_limit = 64;
  ah.port_num = 1;
}

}  // namespace uroce::compat::cma

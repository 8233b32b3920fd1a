// librdmacm's convenience layer: rdma_getaddrinfo, endpoints (rdma_create_ep and friends, whose
// ids are synchronous) and rdma_get_request for their listeners.
#include <netdb.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <rdma/rdma_verbs.h>

#include "compat/cma/cma.hpp"

using namespace uroce::compat::cma;

namespace {


sockaddr* copy_addr(const sockaddr* sa, socklen_t len) {
  auto* out = static_cast<sockaddr*>(std::calloc(1, sizeof(sockaddr_storage)));
  if (out) std::memcpy(out, sa, std::min<size_t>(len, sizeof(sockaddr_storage)));
  return out;
}

}  // namespace

extern "C" {

void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res) {
    rdma_addrinfo* next = res->ai_next;
    std::free(res->ai_src_addr);
    std::free(res->ai_dst_addr);
    std::free(res->ai_src_canonname);
    std::free(res->ai_dst_canonname);
    std::free(res->ai_route);
    std::free(res->ai_connect);
    std::free(res);
    res = next;
  }
}

// As librdmacm: getaddrinfo's answer for node and service, as the source of a passive endpoint
// or the destination of an active one, or, with neither, the addresses the hints carry;
// getaddrinfo's error codes pass through.
int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints, rdma_addrinfo** res) {
  bool from_hints = !node && !service;
  if (!res || (from_hints && !(hints && (hints->ai_src_addr || hints->ai_dst_addr)))) return fail(EINVAL);
  int flags = hints ? hints->ai_flags : 0;
  addrinfo* ai = nullptr;
  if (!from_hints) {
    addrinfo h{};
    if (flags & RAI_PASSIVE) h.ai_flags |= AI_PASSIVE;
    if (flags & RAI_NUMERICHOST) h.ai_flags |= AI_NUMERICHOST;
    if (hints && (hints->ai_family == AF_INET || hints->ai_family == AF_INET6)) h.ai_family = hints->ai_family;
    h.ai_socktype = SOCK_STREAM;
    if (int rc = getaddrinfo(node, service, &h, &ai)) return rc;
  }
  auto* r = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  if (!r) {
    if (ai) freeaddrinfo(ai);
    return fail(ENOMEM);
  }
  r->ai_flags = flags;
  r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
  r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type
                  : r->ai_port_space == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
  auto set = [](sockaddr*& to, socklen_t& len, const sockaddr* from, socklen_t from_len) {
    to = copy_addr(from, from_len);
    len = from_len;
  };
  if (ai && (flags & RAI_PASSIVE)) set(r->ai_src_addr, r->ai_src_len, ai->ai_addr, ai->ai_addrlen);
  if (ai && !(flags & RAI_PASSIVE)) set(r->ai_dst_addr, r->ai_dst_len, ai->ai_addr, ai->ai_addrlen);
  if (hints && hints->ai_src_addr && !r->ai_src_len) set(r->ai_src_addr, r->ai_src_len, hints->ai_src_addr, hints->ai_src_len);
  if (hints && hints->ai_dst_addr && !r->ai_dst_len) set(r->ai_dst_addr, r->ai_dst_len, hints->ai_dst_addr, hints->ai_dst_len);
  const sockaddr* any = r->ai_dst_addr ? r->ai_dst_addr : r->ai_src_addr;
  r->ai_family = ai ? ai->ai_family : any ? any->sa_family : AF_UNSPEC;
  if (ai) freeaddrinfo(ai);
  if ((r->ai_src_len && !r->ai_src_addr) || (r->ai_dst_len && !r->ai_dst_addr)) {
    rdma_freeaddrinfo(r);
    return fail(ENOMEM);
  }
  *res = r;
  return 0;
}

int rdma_create_ep(rdma_cm_id** out, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (!out || !res) return fail(EINVAL);
  rdma_cm_id* cid = nullptr;
  if (rdma_create_id(nullptr, &cid, nullptr, rdma_port_space(res->ai_port_space))) return -1;
  Id* id = from(cid);
  int rc;
  if (res->ai_flags & RAI_PASSIVE) {
    rc = rdma_bind_addr(cid, res->ai_src_addr);
    if (!rc && qp_init_attr) id->ep_qp = *qp_init_attr;
    cid->pd = pd;
  } else {
    rc = rdma_resolve_addr(cid, res->ai_src_addr, res->ai_dst_addr, 2000);
    if (!rc) rc = rdma_resolve_route(cid, 2000);
    if (!rc && qp_init_attr) {
      qp_init_attr->qp_type = ibv_qp_type(res->ai_qp_type);
      rc = rdma_create_qp(cid, pd, qp_init_attr);
    }
  }
  if (rc) {
    int err = errno;
    rdma_destroy_ep(cid);
    return fail(err);
  }
  *out = cid;
  return 0;
}

void rdma_destroy_ep(rdma_cm_id* id) {
  if (!id) return;
  if (id->qp) rdma_destroy_qp(id);
  if (id->srq) rdma_destroy_srq(id);
  rdma_destroy_id(id);
}

int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** out) {
  if (!listen || !out || !from(listen)->sync) return fail(EINVAL);
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(listen->channel, &ev)) return -1;
  if (ev->status || ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    int err = ev->status < 0 ? -ev->status : EINVAL;
    rdma_ack_cm_event(ev);
    return fail(err);
  }
  rdma_cm_id* cid = ev->id;
  if (auto& qp = from(listen)->ep_qp) {
    ibv_qp_init_attr attr = *qp;
    attr.qp_type = cid->qp_type;
    if (rdma_create_qp(cid, listen->pd, &attr)) {
      int err = errno;
      rdma_reject(cid, nullptr, 0);
      rdma_ack_cm_event(ev);
      rdma_destroy_id(cid);
      return fail(err);
    }
  }
  cid->event = ev;
  *out = cid;
  return 0;
}

int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (!id || !attr || !id->verbs || id->srq) return fail(EINVAL);
  if (!pd) pd = id->pd ? id->pd : from(id)->dev->pd;
  ibv_srq* srq = ibv_create_srq(pd, attr);
  if (!srq) return -1;
  id->srq = srq;
  id->pd = pd;
  return 0;
}

void rdma_destroy_srq(rdma_cm_id* id) {
  if (id && id->srq) ibv_destroy_srq(std::exchange(id->srq, nullptr));
}

}  // extern "C"

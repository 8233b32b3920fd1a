// The QP of an id: created in INIT (UD: ready at once, with rdma_cm's Q_Key), moved to RTR and
// RTS with what the CM exchange agreed, and to ERR on disconnect, as librdmacm does for programs.
#include <algorithm>
#include <cerrno>
#include <tuple>
#include <utility>

#include "compat/cma/cma.hpp"

namespace uroce::compat::cma {

namespace {

// 4.096 us * 2^14 = 67 ms. The kernel's rdma_cm on RoCE takes its packet lifetime + 1 (19, 2 s,
// on Debian 12's 6.1); a program that wants another sets RDMA_OPTION_ID_ACK_TIMEOUT.
constexpr uint8_t kAckTimeout = 14;
// RNR NAK timer code 0, 655.36 ms, as the kernel's CM gives (cm_init_qp_rtr_attr): a program
// that posts its receive after its own send completed may be descheduled meanwhile, and the
// peer's SEND must wait for it, not run out of RNR retries in a few milliseconds.
constexpr uint8_t kMinRnrTimer = 0;

bool has_offer(const Id* id) {
  return id->state == State::Requested || id->state == State::Replied || id->state == State::Accepted ||
         id->state == State::Connected;
}

int rc_access(const Id* id) {
  int a = IBV_ACCESS_REMOTE_WRITE;
  if (id->ours.responder_resources) a |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  return a;
}

int rtr_attr(Id* id, ibv_qp_attr* a, int* mask) {
  *mask = IBV_QP_STATE;
  if (id->id.qp_type == IBV_QPT_UD) return 0;
  if (!has_offer(id)) return EINVAL;
  auto port = id->dev->dev->query_port();
  a->path_mtu = ibv_mtu(std::min<int>(int(port.active_mtu), id->passive ? int(id->offer.mtu) : int(port.active_mtu)));
  a->dest_qp_num = id->offer.remote_qpn;
  a->rq_psn = rq_psn_of(id);  // an external QP may reach RTR before the REP says which PSN
  set_ah(*id->dev, a->ah_attr, id->offer.peer);
  a->ah_attr.grh.traffic_class = id->tos;
  a->qp_access_flags = rc_access(id);
  *mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_ACCESS_FLAGS;
  if (id->id.qp_type == IBV_QPT_RC) {
    a->max_dest_rd_atomic = id->ours.responder_resources;
    a->min_rnr_timer = kMinRnrTimer;
    *mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  }
  return 0;
}

int rts_attr(Id* id, ibv_qp_attr* a, int* mask) {
  *mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (id->id.qp_type == IBV_QPT_UD) return 0;
  if (!has_offer(id)) return EINVAL;
  a->sq_psn = id->offer.sq_psn;
  if (id->id.qp_type == IBV_QPT_RC) {
    a->timeout = id->ack_timeout.value_or(kAckTimeout);
    // The REQ's retry count serves both sides; each side's RNR retry count is the peer's ask.
    a->retry_cnt = std::min<uint8_t>(id->passive ? id->offer.retry_count : id->ours.retry_count, 7);
    a->rnr_retry = std::min<uint8_t>(id->offer.rnr_retry_count, 7);
    a->max_rd_atomic = id->ours.initiator_depth;
    *mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  return 0;
}

}  // namespace

int qp_attr_for(Id* id, ibv_qp_attr* a, int* mask) {
  if (!id->dev) return EINVAL;
  ibv_qp_state to = a->qp_state;
  *a = {};
  a->qp_state = to;
  if (to == IBV_QPS_RTR) return rtr_attr(id, a, mask);
  if (to == IBV_QPS_RTS) return rts_attr(id, a, mask);
  if (to != IBV_QPS_INIT) return EINVAL;
  a->pkey_index = 0;
  a->port_num = 1;
  *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  if (id->id.qp_type == IBV_QPT_UD) {
    a->qkey = id->qkey;
    *mask |= IBV_QP_QKEY;
  } else {
    a->qp_access_flags = rc_access(id);
    *mask |= IBV_QP_ACCESS_FLAGS;
  }
  return 0;
}

int move_qp(Id* id, ibv_qp_state to) {
  ibv_qp_attr a{};
  a.qp_state = to;
  int mask = 0;
  if (int e = qp_attr_for(id, &a, &mask)) {
    errno = e;
    return -1;
  }
  if (int e = ibv_modify_qp(id->id.qp, &a, mask)) {
    errno = e;
    return -1;
  }
  return 0;
}

int ready_qp(Id* id) { return move_qp(id, IBV_QPS_RTR) ? -1 : move_qp(id, IBV_QPS_RTS); }

void qp_to_error(Id* id) {
  if (!id->id.qp || id->id.qp_type == IBV_QPT_UD) return;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  (void)ibv_modify_qp(id->id.qp, &a, IBV_QP_STATE);
}

namespace {

void destroy_own_cqs(rdma_cm_id* id) {
  for (auto [cq, ch] : {std::pair{&id->send_cq, &id->send_cq_channel}, std::pair{&id->recv_cq, &id->recv_cq_channel}}) {
    if (*cq) ibv_destroy_cq(std::exchange(*cq, nullptr));
    if (*ch) ibv_destroy_comp_channel(std::exchange(*ch, nullptr));
  }
}

// As librdmacm: a QP made without CQs gets one each for sends and receives, with their own
// completion channels (rdma_get_send_comp and rdma_get_recv_comp wait on them).
int make_own_cqs(Id* id, ibv_qp_init_attr_ex* attr) {
  rdma_cm_id& i = id->id;
  for (auto [cq, ch, n, slot] : {std::tuple{&i.send_cq, &i.send_cq_channel, attr->cap.max_send_wr, &attr->send_cq},
                                 std::tuple{&i.recv_cq, &i.recv_cq_channel, attr->cap.max_recv_wr, &attr->recv_cq}}) {
    if (*slot) continue;
    *ch = ibv_create_comp_channel(i.verbs);
    *cq = *ch ? ibv_create_cq(i.verbs, int(std::max(1u, n)), &i, *ch, 0) : nullptr;
    if (!*cq) {
      destroy_own_cqs(&i);
      return -1;
    }
    *slot = *cq;
    id->own_cqs = true;
  }
  return 0;
}

}  // namespace

}  // namespace uroce::compat::cma

using namespace uroce::compat::cma;

extern "C" {

int rdma_create_qp_ex(rdma_cm_id* cid, ibv_qp_init_attr_ex* attr) {
  Id* id = from(cid);
  if (!cid || !attr || !cid->verbs || cid->qp) {
    errno = EINVAL;
    return -1;
  }
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
    attr->pd = cid->pd ? cid->pd : id->dev->pd;
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
  }
  if (attr->pd->context != cid->verbs || (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UC &&
                                          attr->qp_type != IBV_QPT_UD)) {
    errno = EINVAL;
    return -1;
  }
  if (!attr->srq && cid->srq) attr->srq = cid->srq;
  if (make_own_cqs(id, attr)) return -1;
  ibv_qp* qp = ibv_create_qp_ex(cid->verbs, attr);
  if (!qp) {
    int err = errno;
    destroy_own_cqs(cid);
    errno = err;
    return -1;
  }
  cid->qp = qp;
  cid->qp_type = attr->qp_type;
  cid->pd = attr->pd;
  if (id->passive) apply_peer_ece(id);  // a QP for a request takes the options it offered
  bool ok = move_qp(id, IBV_QPS_INIT) == 0;
  if (ok && attr->qp_type == IBV_QPT_UD) ok = move_qp(id, IBV_QPS_RTR) == 0 && move_qp(id, IBV_QPS_RTS) == 0;
  if (!ok) {
    int err = errno;
    ibv_destroy_qp(qp);
    cid->qp = nullptr;
    destroy_own_cqs(cid);
    errno = err;
    return -1;
  }
  return 0;
}

int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (!attr) {
    errno = EINVAL;
    return -1;
  }
  ibv_qp_init_attr_ex ex{};
  ex.qp_context = attr->qp_context;
  ex.send_cq = attr->send_cq;
  ex.recv_cq = attr->recv_cq;
  ex.srq = attr->srq;
  ex.cap = attr->cap;
  ex.qp_type = attr->qp_type;
  ex.sq_sig_all = attr->sq_sig_all;
  ex.pd = pd;
  ex.comp_mask = pd ? IBV_QP_INIT_ATTR_PD : 0;
  if (rdma_create_qp_ex(id, &ex)) return -1;
  attr->cap = ex.cap;
  attr->send_cq = ex.send_cq;
  attr->recv_cq = ex.recv_cq;
  return 0;
}

void rdma_destroy_qp(rdma_cm_id* id) {
  if (!id) return;
  if (id->qp) ibv_destroy_qp(std::exchange(id->qp, nullptr));
  if (from(id)->own_cqs) {
    destroy_own_cqs(id);
    from(id)->own_cqs = false;
  }
}

int rdma_init_qp_attr(rdma_cm_id* cid, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  if (!cid || !qp_attr || !qp_attr_mask) {
    errno = EINVAL;
    return -1;
  }
  std::lock_guard g(registry().mu);
  if (int e = qp_attr_for(from(cid), qp_attr, qp_attr_mask)) {
    errno = e;
    return -1;
  }
  return 0;
}

}  // extern "C"

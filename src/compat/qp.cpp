// The drop-in's queue pairs, shared receive queues and address handles: work request
// conversion and posting, modify/query, and asynchronous events.
#include <arpa/inet.h>
#include <sched.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <array>
#include <mutex>
#include <optional>

#include "compat/internal.hpp"

using namespace uroce;
using namespace uroce::compat;

namespace uroce::compat {

// ibv_send_wr.wr is a union: the UD view is read only for UD QPs.
// A BIND_MW request keeps its MwBind in *bind (read when posting); bind() gives the storage.
template <class BindSlot>
Status to_send_wr(const ibv_send_wr* w, SendWr& o, bool ud, BindSlot bind) {
  if (w->opcode == IBV_WR_SEND_WITH_INV) {
    o.opcode = WrOpcode::SendWithInv;
  } else if (w->opcode == IBV_WR_LOCAL_INV) {
    o.opcode = WrOpcode::LocalInv;
  } else if (w->opcode == IBV_WR_BIND_MW) {
    o.opcode = WrOpcode::BindMw;
  } else if (w->opcode <= IBV_WR_ATOMIC_FETCH_AND_ADD) {
    o.opcode = WrOpcode(w->opcode);  // the same numbers
  } else {
    return make_error(EOPNOTSUPP, "opcode not supported");  // TSO; ATOMIC WRITE and FLUSH: ibv_wr_*, as rxe
  }
  o.wr_id = w->wr_id;
  if (o.opcode == WrOpcode::SendWithInv || o.opcode == WrOpcode::LocalInv) o.invalidate_rkey = w->invalidate_rkey;
  if (o.opcode == WrOpcode::BindMw) {
    if (!w->bind_mw.mw) return make_error(EINVAL, "BIND_MW without a memory window");
    MwBind& b = bind();
    if (Status s = to_mw_bind(w->bind_mw.mw, w->bind_mw.rkey, w->bind_mw.bind_info, b); !s) return s;
    o.bind = &b;
  }
  o.send_flags = w->send_flags;
  o.sg_list = {reinterpret_cast<const Sge*>(w->sg_list), size_t(w->num_sge)};
  if (o.opcode != WrOpcode::SendWithInv && o.opcode != WrOpcode::LocalInv) o.imm_data = ntohl(w->imm_data);
  if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    o.remote_addr = w->wr.atomic.remote_addr;
    o.rkey = w->wr.atomic.rkey;
    o.compare_add = w->wr.atomic.compare_add;
    o.swap = w->wr.atomic.swap;
  } else {
    o.remote_addr = w->wr.rdma.remote_addr;
    o.rkey = w->wr.rdma.rkey;
  }
  if (ud) {
    if (!w->wr.ud.ah) return make_error(EINVAL, "UD send without an address handle");
    o.ah = &from<UAh>(w->wr.ud.ah)->ah;
    o.remote_qpn = w->wr.ud.remote_qpn;
    o.remote_qkey = w->wr.ud.remote_qkey;
  }
  return {};
}

// A chain of work requests goes to the core in batches: one lock and one doorbell per batch.
// The requests before a bad one are posted, as libibverbs promises; *bad names the bad one.
constexpr size_t kPostBatch = 32;

template <class IbvWr, class Wr, class Convert, class Post>
int post_chain(IbvWr* wr, IbvWr** bad, Convert convert, Post post) {
  Wr batch[kPostBatch];
  IbvWr* from_wr[kPostBatch];
  while (wr) {
    size_t n = 0;
    Status converted;
    for (; wr && n < kPostBatch; wr = wr->next, ++n) {
      batch[n] = Wr{};
      if (!(converted = convert(wr, batch[n]))) break;
      from_wr[n] = wr;
    }
    size_t bad_index = 0;
    if (n) {
      if (Status s = post(std::span<const Wr>(batch, n), &bad_index); !s) {
        if (bad) *bad = from_wr[bad_index];
        return s.error().code;
      }
    }
    if (!converted) {
      if (bad) *bad = wr;
      return converted.error().code;
    }
  }
  return 0;
}

int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  bool ud = qp->qp_type == IBV_QPT_UD, xrc = qp->qp_type == IBV_QPT_XRC_SEND;
  QueuePair* q = from<UQp>(qp)->qp.get();
  // BIND_MW requests keep their MwBind here until their batch is posted; made only for them,
  // so that ordinary posts pay nothing for it. post_chain fills batch[n] from the n-th.
  std::optional<std::array<MwBind, kPostBatch>> binds;
  size_t n = 0;
  return post_chain<ibv_send_wr, SendWr>(
      wr, bad,
      [ud, xrc, &binds, &n](const ibv_send_wr* w, SendWr& o) {
        const size_t i = n++ % kPostBatch;
        if (xrc) o.remote_srqn = w->qp_type.xrc.remote_srqn;
        return to_send_wr(w, o, ud, [&]() -> MwBind& {
          if (!binds) binds.emplace();
          return (*binds)[i];
        });
      },
      [q, &n](std::span<const SendWr> ws, size_t* i) {
        n = 0;
        return q->post_send(ws, i);
      });
}

Status to_recv_wr(const ibv_recv_wr* w, RecvWr& o) {
  o = RecvWr{w->wr_id, {reinterpret_cast<const Sge*>(w->sg_list), size_t(w->num_sge)}};
  return {};
}

int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  QueuePair* q = from<UQp>(qp)->qp.get();
  return post_chain<ibv_recv_wr, RecvWr>(wr, bad, to_recv_wr,
                                         [q](std::span<const RecvWr> ws, size_t* i) { return q->post_recv(ws, i); });
}

int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  return post_queue_recv(from<USrq>(srq)->srq.get(), wr, bad);
}

int post_queue_recv(SharedReceiveQueue* q, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  return post_chain<ibv_recv_wr, RecvWr>(wr, bad, to_recv_wr,
                                         [q](std::span<const RecvWr> ws, size_t* i) { return q->post_recv(ws, i); });
}


QpAttr to_attr(const ibv_qp_attr* a, int mask) {
  QpAttr o;
  o.qp_state = QpState(a->qp_state);
  o.cur_qp_state = QpState(a->cur_qp_state);
  o.path_mtu = Mtu(a->path_mtu);
  o.qkey = a->qkey;
  o.rq_psn = a->rq_psn;
  o.sq_psn = a->sq_psn;
  o.dest_qp_num = a->dest_qp_num;
  // Programs pass their regions' access flags to their QPs too (rdma-core's own tests do):
  // what only a region can have means nothing to a QP and is left out, as the kernel does.
  constexpr unsigned kRegionOnly = IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND |
                                   IBV_ACCESS_HUGETLB | unsigned(IBV_ACCESS_OPTIONAL_RANGE);
  o.qp_access_flags = unsigned(a->qp_access_flags) & ~kRegionOnly;
  if (mask & IBV_QP_AV) {
    // RoCE addresses by GID; a path without a GRH (LID only) cannot be routed.
    if (a->ah_attr.is_global) std::memcpy(o.dgid.raw.data(), a->ah_attr.grh.dgid.raw, 16);
    o.hop_limit = a->ah_attr.grh.hop_limit;
    o.traffic_class = a->ah_attr.grh.traffic_class;
    o.sgid_index = a->ah_attr.grh.sgid_index;
  }
  o.pkey_index = a->pkey_index;
  o.port_num = a->port_num;
  o.max_rd_atomic = a->max_rd_atomic;
  o.max_dest_rd_atomic = a->max_dest_rd_atomic;
  o.min_rnr_timer = a->min_rnr_timer;
  o.timeout = a->timeout;
  o.retry_cnt = a->retry_cnt;
  o.rnr_retry = a->rnr_retry;
  o.rate_limit_kbps = a->rate_limit;
  return o;
}


UQp* made_qp(ibv_context* ctx, ibv_pd* pd, std::unique_ptr<QueuePair> qp, ibv_qp_type type, void* qp_context) {
  auto* q = new UQp{};
  q->qp = std::move(qp);
  ibv_qp& ibv = q->qpx.base.qp_base;
  ibv.context = ctx;
  ibv.qp_context = qp_context;
  ibv.pd = pd;
  ibv.qp_num = q->qp->qp_num();
  ibv.handle = ibv.qp_num;
  ibv.state = IBV_QPS_RESET;
  ibv.qp_type = type;
  pthread_mutex_init(&ibv.mutex, nullptr);
  pthread_cond_init(&ibv.cond, nullptr);
  track(ctx, &UDevice::qps, ibv.qp_num, &ibv);
  return q;
}

ibv_qp* create_qp_common(ibv_pd* pd, ibv_qp_init_attr* attr, uint64_t send_ops) {
  const bool ini = attr->qp_type == IBV_QPT_XRC_SEND;  // receives nothing: no receive CQ needed
  if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UC && attr->qp_type != IBV_QPT_UD &&
      attr->qp_type != IBV_QPT_RAW_PACKET && !ini) {
    errno = EOPNOTSUPP;  // driver QPs (an XRC target comes from create_qp_ex)
    return nullptr;
  }
  if (!attr->send_cq || (!attr->recv_cq && !ini)) {
    errno = EINVAL;
    return nullptr;
  }
  QpInit init;
  init.type = QpType(attr->qp_type);
  init.send_cq = from<UCq>(attr->send_cq)->cq.get();
  init.recv_cq = attr->recv_cq ? from<UCq>(attr->recv_cq)->cq.get() : nullptr;
  init.srq = attr->srq ? from<USrq>(attr->srq)->srq.get() : nullptr;
  // A queue of 0 is legal in verbs (a QP that only receives, as qperf's servers make): one slot.
  // An initiator receives nothing: its receive capacities are 0, whatever was asked (as the kernel).
  if (ini) attr->cap.max_recv_wr = attr->cap.max_recv_sge = 0;
  init.cap = QpCap{attr->cap.max_send_wr ? attr->cap.max_send_wr : 1, attr->cap.max_recv_wr || ini ? attr->cap.max_recv_wr : 1,
                   attr->cap.max_send_sge ? attr->cap.max_send_sge : 1,
                   attr->cap.max_recv_sge ? attr->cap.max_recv_sge : 1, attr->cap.max_inline_data};
  init.sq_sig_all = attr->sq_sig_all != 0;
  auto qp = from<UPd>(pd)->pd->create_qp(init);
  if (!qp) return fail<ibv_qp>(qp.error());
  UQp* q = made_qp(pd->context, pd, std::move(*qp), attr->qp_type, attr->qp_context);
  if (send_ops) set_send_ops(q->qpx);
  ibv_qp& ibv = q->qpx.base.qp_base;
  ibv.send_cq = attr->send_cq;
  ibv.recv_cq = attr->recv_cq;
  ibv.srq = attr->srq;
  QpAttr a = q->qp->query();
  attr->cap.max_send_wr = a.cap.max_send_wr;
  attr->cap.max_recv_wr = a.cap.max_recv_wr;
  ++from<UPd>(pd)->objects;
  return &ibv;
}


// Packet pacing, as mlx5 takes it: a burst or typical size only beside a rate, no comp_mask.
int modify_qp_rate_limit(ibv_qp* qp, ibv_qp_rate_limit_attr* attr) {
  if (!qp || !attr || attr->comp_mask || ((attr->max_burst_sz || attr->typical_pkt_sz) && !attr->rate_limit))
    return EINVAL;
  Status s = from<UQp>(qp)->qp->set_rate_limit(RateLimit{attr->rate_limit, attr->max_burst_sz, attr->typical_pkt_sz});
  return s ? 0 : s.error().code;
}

}  // namespace uroce::compat

extern "C" {

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
  auto srq = from<UPd>(pd)->pd->create_srq(attr->attr.max_wr, attr->attr.max_sge, attr->attr.srq_limit);
  if (!srq) return fail<ibv_srq>(srq.error());
  ibv_srq* s = made_srq(pd, std::move(*srq), attr->srq_context);
  attr->attr.max_wr = from<USrq>(s)->srq->capacity();
  return s;
}

int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
  if (mask & ~IBV_SRQ_LIMIT) return EOPNOTSUPP;  // resizing is not supported
  Status s = from<USrq>(srq)->srq->arm_limit(attr->srq_limit);
  return s ? 0 : s.error().code;
}

int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
  USrq* s = from<USrq>(srq);
  attr->max_wr = s->srq->capacity();
  attr->max_sge = s->srq->max_sge();
  attr->srq_limit = s->srq->limit();
  return 0;
}

int ibv_destroy_srq(ibv_srq* srq) {
  if (from<USrq>(srq)->srq->busy()) return EBUSY;
  track<ibv_srq>(srq->context, &UDevice::srqs, srq->handle, nullptr);
  wait_acks(srq->context, srq);
  --from<UPd>(srq->pd)->objects;
  if (UXrcd* x = from<USrq>(srq)->xrcd) --x->objects;
  delete from<USrq>(srq);
  return 0;
}

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) { return create_qp_common(pd, attr, 0); }

namespace {

bool loopback_gid(const Gid& g) { return (g.ipv4() && *g.ipv4() >> 24 == 127) || g == *Gid::parse("::1"); }

// A loopback device's packets never leave the host: a QP of one aimed at an address no device
// of this host has will end in retry exceeded, so the program is told why at once (once).
void warn_if_out_of_reach(ibv_context* ctx, const ibv_gid& dgid) {
  Gid peer;
  std::memcpy(peer.raw.data(), dgid.raw, 16);
  auto own = uctx(ctx)->dev->query_gid(0);
  if (!own || !loopback_gid(*own) || loopback_gid(peer) || !Device::name_for(peer.to_string()).empty()) return;
  static std::once_flag said;
  std::call_once(said, [&] {
    std::fprintf(stderr, "uroce: a QP of %s, a loopback device, is connected to %s, which it cannot reach: "
                         "open the device of the interface toward it (ibv_devices lists them)\n",
                 uctx(ctx)->dev->name().c_str(), peer.to_string().c_str());
  });
}

}  // namespace

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  if ((mask & IBV_QP_AV) && !attr->ah_attr.is_global) {
    // RoCE addresses a peer by GID only, so this fails on every RoCE NIC; said once, because
    // programs print just "Failed to modify QP".
    static std::once_flag said;
    std::call_once(said, [] {
      std::fprintf(stderr, "uroce: ibv_modify_qp: RoCE needs the peer's GID (ah_attr.is_global = 1 and grh.dgid); "
                           "rdma-core's pingpong programs and perftest take it with -g/-x <GID index>\n");
    });
    return EINVAL;
  }
  Status s = from<UQp>(qp)->qp->modify(to_attr(attr, mask), uint32_t(mask));
  if (!s) return s.error().code;
  if (mask & IBV_QP_STATE) qp->state = attr->qp_state;
  if (mask & IBV_QP_AV) warn_if_out_of_reach(qp->context, attr->ah_attr.grh.dgid);
  return 0;
}

// ECE: uroce's one vendor option is selective repeat. A connection manager exchanges what
// ibv_query_ece reports and hands the agreed options to ibv_set_ece (in RESET or INIT); a QP
// uses selective repeat only with a peer that answers in kind, so agreeing is all it takes.
int ibv_query_ece(ibv_qp* qp, ibv_ece* ece) {
  if (!qp || !ece) return EINVAL;
  *ece = {};
  ece->vendor_id = kVendorId;
  UQp* u = from<UQp>(qp);
  // What it offers until options are set (a connection manager sends this), then what was set.
  const bool sr = u->ece_set ? u->qp->selective_repeat() : true;
  ece->options = qp->qp_type == IBV_QPT_RC && sr ? kEceSelectiveRepeat : 0;
  return 0;
}

int ibv_set_ece(ibv_qp* qp, ibv_ece* ece) {
  if (!qp || !ece || ece->comp_mask) return EINVAL;
  if (ece->vendor_id != kVendorId) return EOPNOTSUPP;  // another vendor's options mean nothing here
  if (ece->options & ~kEceSelectiveRepeat) return EOPNOTSUPP;
  Status s = from<UQp>(qp)->qp->set_reliability(ece->options & kEceSelectiveRepeat ? Reliability::Sr : Reliability::Gbn);
  if (!s) return s.error().code;
  from<UQp>(qp)->ece_set = true;
  return 0;
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int, ibv_qp_init_attr* init) {
  QpAttr a = from<UQp>(qp)->qp->query();
  *attr = ibv_qp_attr{};
  attr->qp_state = ibv_qp_state(a.qp_state);
  attr->cur_qp_state = attr->qp_state;
  attr->path_mtu = ibv_mtu(a.path_mtu);
  attr->qkey = a.qkey;
  attr->rq_psn = a.rq_psn;
  attr->sq_psn = a.sq_psn;
  attr->dest_qp_num = a.dest_qp_num;
  attr->qp_access_flags = int(a.qp_access_flags);
  attr->cap = {a.cap.max_send_wr, a.cap.max_recv_wr, a.cap.max_send_sge, a.cap.max_recv_sge, a.cap.max_inline_data};
  attr->ah_attr.is_global = 1;
  std::memcpy(attr->ah_attr.grh.dgid.raw, a.dgid.raw.data(), 16);
  attr->ah_attr.grh.hop_limit = a.hop_limit;
  attr->ah_attr.port_num = 1;
  attr->max_rd_atomic = a.max_rd_atomic;
  attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
  attr->min_rnr_timer = a.min_rnr_timer;
  attr->port_num = 1;
  attr->timeout = a.timeout;
  attr->retry_cnt = a.retry_cnt;
  attr->rnr_retry = a.rnr_retry;
  if (init) {
    *init = ibv_qp_init_attr{};
    init->qp_context = qp->qp_context;
    init->send_cq = qp->send_cq;
    init->recv_cq = qp->recv_cq;
    init->srq = qp->srq;
    init->cap = attr->cap;
    init->qp_type = qp->qp_type;
  }
  return 0;
}

// Multicast (RoCE: the group's GID; the LID is IB's and unused). A UD QP only.
static Gid group_of(const ibv_gid& gid) {
  Gid g;
  std::memcpy(g.raw.data(), gid.raw, 16);
  return g;
}
int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t) {
  if (!qp || !gid) return EINVAL;
  Status s = from<UQp>(qp)->qp->attach_mcast(group_of(*gid));
  return s ? 0 : s.error().code;
}
int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t) {
  if (!qp || !gid) return EINVAL;
  Status s = from<UQp>(qp)->qp->detach_mcast(group_of(*gid));
  return s ? 0 : s.error().code;
}

int ibv_destroy_qp(ibv_qp* qp) {
  // As the kernel's: a QP still attached to a multicast group is the program's to detach first.
  if (from<UQp>(qp)->qp->mcast_groups()) return EBUSY;
  if (from<UQp>(qp)->qp->flows()) return EBUSY;  // and so are its flow rules
  track<ibv_qp>(qp->context, &UDevice::qps, qp->qp_num, nullptr);
  wait_acks(qp->context, qp);
  if (qp->pd) --from<UPd>(qp->pd)->objects;
  if (UXrcd* x = from<UQp>(qp)->xrcd) --x->objects;  // an XRC target's
  if (ibv_rwq_ind_table* t = from<UQp>(qp)->table) release_table(t);  // an RSS QP's
  delete from<UQp>(qp);
  return 0;
}

ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  if (!pd || !attr) {
    errno = EINVAL;
    return nullptr;
  }
  if (!attr->is_global) {
    errno = EINVAL;  // RoCE addresses need a GRH with the destination GID
    return nullptr;
  }
  std::atomic<uint32_t>& held = uctx(pd->context)->shared->ahs;
  if (held.fetch_add(1) >= kMaxAh) {
    held.fetch_sub(1);
    errno = ENOMEM;
    return nullptr;
  }
  auto* a = new UAh{};
  std::memcpy(a->ah.dgid.raw.data(), attr->grh.dgid.raw, 16);
  a->ah.sgid_index = attr->grh.sgid_index;
  if (a->ah.dgid == Gid{}) {
    held.fetch_sub(1);
    delete a;
    errno = EINVAL;
    return nullptr;
  }
  a->ah.hop_limit = attr->grh.hop_limit;
  a->ibv.context = pd->context;
  a->ibv.pd = pd;
  return &a->ibv;
}

int ibv_destroy_ah(ibv_ah* ah) {
  uctx(ah->context)->shared->ahs.fetch_sub(1);
  delete from<UAh>(ah);
  return 0;
}

int ibv_get_async_event(ibv_context* ctx, ibv_async_event* event) {
  UContext* c = uctx(ctx);
  for (;;) {
    auto e = c->dev->get_async_event();
    if (e) {
      event->event_type = ibv_event_type(e->type);
      UDevice& d = *c->shared;
      std::lock_guard g(d.mu);
      switch (e->type) {
        case AsyncEventType::QpFatal:
        case AsyncEventType::QpLastWqeReached: {
          auto it = d.qps.find(e->qp_num);
          if (it == d.qps.end()) continue;  // its QP was destroyed: nobody to tell
          event->element.qp = it->second;
          ++d.unacked[it->second];
          break;
        }
        case AsyncEventType::SrqLimitReached: {
          auto it = d.srqs.find(e->srq_handle);
          if (it == d.srqs.end()) continue;
          event->element.srq = it->second;
          ++d.unacked[it->second];
          break;
        }
        case AsyncEventType::CqErr:
          event->element.cq = nullptr;
          break;
        case AsyncEventType::PortActive:
          event->element.port_num = e->port_num;
          break;
      }
      return 0;
    }
    // As libibverbs: an async fd the program made non-blocking fails with EAGAIN when empty.
    if (fcntl(ctx->async_fd, F_GETFL) & O_NONBLOCK) {
      errno = EAGAIN;
      return -1;
    }
    pollfd p{c->dev->async_fd(), POLLIN, 0};  // blocks until an event is queued
    (void)poll(&p, 1, -1);
  }
}

void ibv_ack_async_event(ibv_async_event* event) {
  // The only object events uroce raises (see ibv_get_async_event).
  bool srq = event->event_type == IBV_EVENT_SRQ_LIMIT_REACHED;
  bool qp = event->event_type == IBV_EVENT_QP_FATAL || event->event_type == IBV_EVENT_QP_LAST_WQE_REACHED;
  const void* obj = srq ? static_cast<const void*>(event->element.srq) : qp ? event->element.qp : nullptr;
  if (!obj) return;
  UDevice& d = *uctx(srq ? event->element.srq->context : event->element.qp->context)->shared;
  std::lock_guard g(d.mu);
  auto it = d.unacked.find(obj);
  if (it != d.unacked.end() && it->second > 0) --it->second;
  d.acked.notify_all();
}

ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  if (!(wc->wc_flags & IBV_WC_GRH) || port_num != 1) {
    errno = EINVAL;
    return nullptr;
  }
  ibv_ah_attr attr;
  if (int rc = ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr)) {
    errno = rc;
    return nullptr;
  }
  return ibv_create_ah(pd, &attr);
}

int ibv_init_ah_from_wc(ibv_context* ctx, uint8_t port_num, ibv_wc* wc, ibv_grh* grh, ibv_ah_attr* attr) {
  if (port_num != 1 || !(wc->wc_flags & IBV_WC_GRH)) return EINVAL;
  Ah from = Ah::from_grh(grh);
  *attr = ibv_ah_attr{};
  attr->is_global = 1;
  std::memcpy(attr->grh.dgid.raw, from.dgid.raw.data(), 16);
  // The answer leaves from the address the datagram came to: its index in our GID table.
  const uint8_t* g = reinterpret_cast<const uint8_t*>(grh);
  Gid to;
  if (from.dgid.ipv4())
    to = Gid::from_ipv4(uint32_t(g[36]) << 24 | uint32_t(g[37]) << 16 | uint32_t(g[38]) << 8 | g[39]);
  else
    std::memcpy(to.raw.data(), g + 24, 16);
  for (int i = 0; auto mine = uctx(ctx)->dev->query_gid(i); ++i)
    if (*mine == to) attr->grh.sgid_index = uint8_t(i);
  attr->grh.hop_limit = 64;
  attr->port_num = 1;
  return 0;
}

}  // extern "C"

// libibverbs.so.1 on uroce: rdma-core's verbs ABI (as Debian 12's rdma-core 44 defines it) for
// unmodified programs. Errors follow libibverbs: NULL with errno set, or a positive errno.
#include <arpa/inet.h>
#include <sched.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "compat/objects.hpp"

using namespace uroce;
using namespace uroce::compat;

// The header routes these through inline wrappers; the library defines the functions.
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

extern "C" int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index, int* type);

namespace {

// Async events name their QP or SRQ: keep handle -> program pointer per context.
template <class T>
void track(ibv_context* ctx, std::map<uint32_t, T*> UContext::*m, uint32_t key, T* obj) {
  UContext* c = uctx(ctx);
  std::lock_guard g(c->mu);
  if (obj)
    (c->*m)[key] = obj;
  else
    (c->*m).erase(key);
}

ibv_device g_device = [] {
  ibv_device d{};
  d.node_type = IBV_NODE_CA;
  d.transport_type = IBV_TRANSPORT_IB;
  std::snprintf(d.name, sizeof d.name, "uroce0");
  std::snprintf(d.dev_name, sizeof d.dev_name, "uverbs0");
  return d;
}();

template <class T>
T* fail(const Error& e) {
  errno = e.code;
  return nullptr;
}

// Programs busy-poll: after a run of empty polls, give the core away once so that the NIC
// engine threads run even where there are fewer cores than spinning threads.
thread_local unsigned t_empty_polls = 0;

unsigned wc_flags(const Wc& w) { return (w.with_imm ? IBV_WC_WITH_IMM : 0) | (w.with_grh ? IBV_WC_GRH : 0); }

void count_poll(int got) {
  if (got) {
    t_empty_polls = 0;
  } else if (++t_empty_polls % 64 == 0) {
    sched_yield();
  }
}

int poll_cq(ibv_cq* cq, int n, ibv_wc* out) {
  Wc wc[32];
  int total = 0;
  while (total < n) {
    int k = from<UCq>(cq)->cq->poll({wc, size_t(std::min(n - total, 32))});
    for (int i = 0; i < k; ++i) {
      ibv_wc& o = out[total + i];
      const Wc& w = wc[i];
      o = ibv_wc{};
      o.wr_id = w.wr_id;
      o.status = ibv_wc_status(w.status);
      o.opcode = ibv_wc_opcode(w.opcode);
      o.vendor_err = w.vendor_err;
      o.byte_len = w.byte_len;
      o.imm_data = htonl(w.imm_data);
      o.qp_num = w.qp_num;
      o.src_qp = w.src_qp;
      o.wc_flags = wc_flags(w);
    }
    total += k;
    if (k < 32) break;
  }
  count_poll(total);
  return total;
}

int req_notify_cq(ibv_cq* cq, int solicited_only) {
  return from<UCq>(cq)->cq->req_notify(solicited_only != 0) ? 0 : EINVAL;
}

// The extended CQ's polling: one completion at a time, taken from the ring by start/next_poll
// (so nothing is held back between end_poll and the next start_poll) and read field by field.
UCq* ucq(ibv_cq_ex* c) { return from<UCq>(c); }

int x_next_poll(ibv_cq_ex* cq) {
  UCq* c = ucq(cq);
  int got = c->cq->poll({&c->cur, 1});
  count_poll(got);
  if (!got) return ENOENT;
  cq->wr_id = c->cur.wr_id;
  cq->status = ibv_wc_status(c->cur.status);
  return 0;
}
int x_start_poll(ibv_cq_ex* cq, ibv_poll_cq_attr* attr) {
  if (attr && attr->comp_mask) return EINVAL;
  return x_next_poll(cq);
}
void x_end_poll(ibv_cq_ex*) {}
ibv_wc_opcode x_read_opcode(ibv_cq_ex* cq) { return ibv_wc_opcode(ucq(cq)->cur.opcode); }
uint32_t x_read_vendor_err(ibv_cq_ex* cq) { return ucq(cq)->cur.vendor_err; }
uint32_t x_read_byte_len(ibv_cq_ex* cq) { return ucq(cq)->cur.byte_len; }
__be32 x_read_imm_data(ibv_cq_ex* cq) { return htonl(ucq(cq)->cur.imm_data); }
uint32_t x_read_qp_num(ibv_cq_ex* cq) { return ucq(cq)->cur.qp_num; }
uint32_t x_read_src_qp(ibv_cq_ex* cq) { return ucq(cq)->cur.src_qp; }
unsigned x_read_wc_flags(ibv_cq_ex* cq) { return wc_flags(ucq(cq)->cur); }
uint32_t x_read_slid(ibv_cq_ex*) { return 0; }  // RoCE has no LIDs
uint8_t x_read_sl(ibv_cq_ex*) { return 0; }
uint8_t x_read_dlid_path_bits(ibv_cq_ex*) { return 0; }

UCq* new_cq(ibv_context* ctx, uint32_t cqe, void* cq_context, ibv_comp_channel* channel) {
  auto cq = uctx(ctx)->dev->create_cq(cqe);
  if (!cq) return fail<UCq>(cq.error());
  auto* c = new UCq{};
  c->cq = std::move(*cq);
  c->ibv.context = ctx;
  c->ibv.channel = channel;
  c->ibv.cq_context = cq_context;
  c->ibv.cqe = int(c->cq->capacity());
  pthread_mutex_init(&c->ibv.mutex, nullptr);
  pthread_cond_init(&c->ibv.cond, nullptr);
  if (channel) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = c;
    epoll_ctl(channel->fd, EPOLL_CTL_ADD, c->cq->fd(), &ev);
    ++channel->refcnt;
  }
  return c;
}

// The standard fields only: no timestamps, VLAN, flow tag or tag matching, and no parent domain.
ibv_cq_ex* create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* a) {
  if (a->cqe == 0 || a->cqe > uint32_t(INT32_MAX) || a->comp_vector >= uint32_t(ctx->num_comp_vectors) ||
      (a->comp_mask & ~uint32_t(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD))) {
    errno = EINVAL;
    return nullptr;
  }
  uint32_t flags = a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS ? a->flags : 0;
  if ((a->wc_flags & ~uint64_t(IBV_WC_STANDARD_FLAGS)) || (a->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) ||
      (flags & ~uint32_t(IBV_CREATE_CQ_ATTR_SINGLE_THREADED))) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  UCq* c = new_cq(ctx, a->cqe, a->cq_context, a->channel);
  if (!c) return nullptr;
  ibv_cq_ex& x = c->ibv;
  x.start_poll = x_start_poll;
  x.next_poll = x_next_poll;
  x.end_poll = x_end_poll;
  x.read_opcode = x_read_opcode;
  x.read_vendor_err = x_read_vendor_err;
  x.read_byte_len = x_read_byte_len;
  x.read_imm_data = x_read_imm_data;
  x.read_qp_num = x_read_qp_num;
  x.read_src_qp = x_read_src_qp;
  x.read_wc_flags = x_read_wc_flags;
  x.read_slid = x_read_slid;
  x.read_sl = x_read_sl;
  x.read_dlid_path_bits = x_read_dlid_path_bits;
  return &x;
}

// ibv_send_wr.wr is a union: the UD view is read only for UD QPs.
Status to_send_wr(const ibv_send_wr* w, SendWr& o, bool ud) {
  if (w->opcode > IBV_WR_ATOMIC_FETCH_AND_ADD) return make_error(EOPNOTSUPP, "opcode not supported");
  o.wr_id = w->wr_id;
  o.opcode = WrOpcode(w->opcode);
  o.send_flags = w->send_flags;
  o.sg_list = {reinterpret_cast<const Sge*>(w->sg_list), size_t(w->num_sge)};
  o.imm_data = ntohl(w->imm_data);
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
  bool ud = qp->qp_type == IBV_QPT_UD;
  QueuePair* q = from<UQp>(qp)->qp.get();
  return post_chain<ibv_send_wr, SendWr>(
      wr, bad, [ud](const ibv_send_wr* w, SendWr& o) { return to_send_wr(w, o, ud); },
      [q](std::span<const SendWr> ws, size_t* i) { return q->post_send(ws, i); });
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
  SharedReceiveQueue* q = from<USrq>(srq)->srq.get();
  return post_chain<ibv_recv_wr, RecvWr>(wr, bad, to_recv_wr,
                                         [q](std::span<const RecvWr> ws, size_t* i) { return q->post_recv(ws, i); });
}

ibv_mw* alloc_mw(ibv_pd*, ibv_mw_type) {
  errno = EOPNOTSUPP;
  return nullptr;
}
int bind_mw(ibv_qp*, ibv_mw*, ibv_mw_bind*) { return EOPNOTSUPP; }
int dealloc_mw(ibv_mw*) { return EOPNOTSUPP; }

QpAttr to_attr(const ibv_qp_attr* a, int mask) {
  QpAttr o;
  o.qp_state = QpState(a->qp_state);
  o.cur_qp_state = QpState(a->cur_qp_state);
  o.path_mtu = Mtu(a->path_mtu);
  o.qkey = a->qkey;
  o.rq_psn = a->rq_psn;
  o.sq_psn = a->sq_psn;
  o.dest_qp_num = a->dest_qp_num;
  o.qp_access_flags = a->qp_access_flags;
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
  return o;
}


// ---------------------------------------------------------------- extended send API
// ibv_wr_start opens a batch; each ibv_wr_<op> starts a request that the ibv_wr_set_* calls
// complete; ibv_wr_complete posts the batch, ibv_wr_abort drops it.

UQp* uqp(ibv_qp_ex* q) { return reinterpret_cast<UQp*>(q); }

PendingWr& next_wr(ibv_qp_ex* qx, WrOpcode op) {
  UQp* q = uqp(qx);
  if (q->batch_len == q->batch.size()) q->batch.emplace_back();
  PendingWr& p = q->batch[q->batch_len++];
  p.wr = SendWr{};
  p.wr.wr_id = qx->wr_id;
  p.wr.opcode = op;
  p.wr.send_flags = qx->wr_flags & (IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED);
  p.sges.clear();
  p.inline_data.clear();
  p.ah = nullptr;
  return p;
}

PendingWr* current(ibv_qp_ex* qx) {
  UQp* q = uqp(qx);
  if (!q->batch_len) {
    q->batch_err = EINVAL;  // a set_* before any request
    return nullptr;
  }
  return &q->batch[q->batch_len - 1];
}

void x_start(ibv_qp_ex* qx) {
  uqp(qx)->batch_len = 0;
  uqp(qx)->batch_err = 0;
}
void x_abort(ibv_qp_ex* qx) { uqp(qx)->batch_len = 0; }

int x_complete(ibv_qp_ex* qx) {
  UQp* q = uqp(qx);
  int err = q->batch_err;
  for (size_t i = 0; i < q->batch_len && !err; ++i) {
    PendingWr& p = q->batch[i];
    Sge inl;
    if (!p.inline_data.empty() || (p.wr.send_flags & kSendInline)) {
      inl = Sge{uint64_t(p.inline_data.data()), uint32_t(p.inline_data.size()), 0};
      p.wr.sg_list = {&inl, 1};
      p.wr.send_flags |= kSendInline;
    } else {
      p.wr.sg_list = p.sges;
    }
    p.wr.ah = p.ah;
    if (Status s = q->qp->post_send(p.wr); !s) err = s.error().code;
  }
  q->batch_len = 0;
  q->batch_err = 0;
  return err;
}

void x_send(ibv_qp_ex* qx) { next_wr(qx, WrOpcode::Send); }
void x_send_imm(ibv_qp_ex* qx, __be32 imm) { next_wr(qx, WrOpcode::SendWithImm).wr.imm_data = ntohl(imm); }
void x_rdma_write(ibv_qp_ex* qx, uint32_t rkey, uint64_t addr) {
  PendingWr& p = next_wr(qx, WrOpcode::RdmaWrite);
  p.wr.rkey = rkey;
  p.wr.remote_addr = addr;
}
void x_rdma_write_imm(ibv_qp_ex* qx, uint32_t rkey, uint64_t addr, __be32 imm) {
  PendingWr& p = next_wr(qx, WrOpcode::RdmaWriteWithImm);
  p.wr.rkey = rkey;
  p.wr.remote_addr = addr;
  p.wr.imm_data = ntohl(imm);
}
void x_rdma_read(ibv_qp_ex* qx, uint32_t rkey, uint64_t addr) {
  PendingWr& p = next_wr(qx, WrOpcode::RdmaRead);
  p.wr.rkey = rkey;
  p.wr.remote_addr = addr;
}
void x_cmp_swp(ibv_qp_ex* qx, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap) {
  PendingWr& p = next_wr(qx, WrOpcode::AtomicCmpSwp);
  p.wr.rkey = rkey;
  p.wr.remote_addr = addr;
  p.wr.compare_add = compare;
  p.wr.swap = swap;
}
void x_fetch_add(ibv_qp_ex* qx, uint32_t rkey, uint64_t addr, uint64_t add) {
  PendingWr& p = next_wr(qx, WrOpcode::AtomicFetchAdd);
  p.wr.rkey = rkey;
  p.wr.remote_addr = addr;
  p.wr.compare_add = add;
}
void x_set_sge(ibv_qp_ex* qx, uint32_t lkey, uint64_t addr, uint32_t length) {
  if (PendingWr* p = current(qx)) p->sges.assign(1, Sge{addr, length, lkey});
}
void x_set_sge_list(ibv_qp_ex* qx, size_t n, const ibv_sge* list) {
  if (PendingWr* p = current(qx)) {
    auto* s = reinterpret_cast<const Sge*>(list);
    p->sges.assign(s, s + n);
  }
}
void x_set_inline_data(ibv_qp_ex* qx, void* addr, size_t length) {
  if (PendingWr* p = current(qx)) {
    auto* b = static_cast<uint8_t*>(addr);
    p->inline_data.assign(b, b + length);
    p->wr.send_flags |= kSendInline;
  }
}
void x_set_inline_data_list(ibv_qp_ex* qx, size_t n, const ibv_data_buf* bufs) {
  if (PendingWr* p = current(qx)) {
    p->inline_data.clear();
    for (size_t i = 0; i < n; ++i) {
      auto* b = static_cast<uint8_t*>(bufs[i].addr);
      p->inline_data.insert(p->inline_data.end(), b, b + bufs[i].length);
    }
    p->wr.send_flags |= kSendInline;
  }
}
void x_set_ud_addr(ibv_qp_ex* qx, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  if (PendingWr* p = current(qx)) {
    p->ah = &from<UAh>(ah)->ah;
    p->wr.remote_qpn = remote_qpn;
    p->wr.remote_qkey = remote_qkey;
  }
}
// Operations uroce does not have: the batch fails at ibv_wr_complete.
void x_unsupported_inv(ibv_qp_ex* qx, uint32_t) { uqp(qx)->batch_err = EOPNOTSUPP; }
void x_unsupported_mw(ibv_qp_ex* qx, ibv_mw*, uint32_t, const ibv_mw_bind_info*) { uqp(qx)->batch_err = EOPNOTSUPP; }
void x_unsupported_tso(ibv_qp_ex* qx, void*, uint16_t, uint16_t) { uqp(qx)->batch_err = EOPNOTSUPP; }
void x_unsupported_aw(ibv_qp_ex* qx, uint32_t, uint64_t, const void*) { uqp(qx)->batch_err = EOPNOTSUPP; }

void set_send_ops(ibv_qp_ex& x) {
  x.wr_start = x_start;
  x.wr_complete = x_complete;
  x.wr_abort = x_abort;
  x.wr_send = x_send;
  x.wr_send_imm = x_send_imm;
  x.wr_rdma_write = x_rdma_write;
  x.wr_rdma_write_imm = x_rdma_write_imm;
  x.wr_rdma_read = x_rdma_read;
  x.wr_atomic_cmp_swp = x_cmp_swp;
  x.wr_atomic_fetch_add = x_fetch_add;
  x.wr_set_sge = x_set_sge;
  x.wr_set_sge_list = x_set_sge_list;
  x.wr_set_inline_data = x_set_inline_data;
  x.wr_set_inline_data_list = x_set_inline_data_list;
  x.wr_set_ud_addr = x_set_ud_addr;
  x.wr_local_inv = x_unsupported_inv;
  x.wr_send_inv = x_unsupported_inv;
  x.wr_set_xrc_srqn = x_unsupported_inv;
  x.wr_bind_mw = x_unsupported_mw;
  x.wr_send_tso = x_unsupported_tso;
  x.wr_atomic_write = x_unsupported_aw;
}

ibv_qp* create_qp_common(ibv_pd* pd, ibv_qp_init_attr* attr, uint64_t send_ops) {
  if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UC && attr->qp_type != IBV_QPT_UD) {
    errno = EOPNOTSUPP;  // XRC, raw packet, driver QPs
    return nullptr;
  }
  if (!attr->send_cq || !attr->recv_cq) {
    errno = EINVAL;
    return nullptr;
  }
  QpInit init;
  init.type = QpType(attr->qp_type);
  init.send_cq = from<UCq>(attr->send_cq)->cq.get();
  init.recv_cq = from<UCq>(attr->recv_cq)->cq.get();
  init.srq = attr->srq ? from<USrq>(attr->srq)->srq.get() : nullptr;
  init.cap = QpCap{attr->cap.max_send_wr, attr->cap.max_recv_wr ? attr->cap.max_recv_wr : 1,
                   attr->cap.max_send_sge ? attr->cap.max_send_sge : 1,
                   attr->cap.max_recv_sge ? attr->cap.max_recv_sge : 1, attr->cap.max_inline_data};
  init.sq_sig_all = attr->sq_sig_all != 0;
  auto qp = from<UPd>(pd)->pd->create_qp(init);
  if (!qp) return fail<ibv_qp>(qp.error());
  auto* q = new UQp{};
  q->qp = std::move(*qp);
  if (send_ops) set_send_ops(q->qpx);
  ibv_qp& ibv = q->qpx.qp_base;
  ibv.context = pd->context;
  ibv.qp_context = attr->qp_context;
  ibv.pd = pd;
  ibv.send_cq = attr->send_cq;
  ibv.recv_cq = attr->recv_cq;
  ibv.srq = attr->srq;
  ibv.qp_num = q->qp->qp_num();
  ibv.handle = ibv.qp_num;
  ibv.state = IBV_QPS_RESET;
  ibv.qp_type = attr->qp_type;
  pthread_mutex_init(&ibv.mutex, nullptr);
  pthread_cond_init(&ibv.cond, nullptr);
  QpAttr a = q->qp->query();
  attr->cap.max_send_wr = a.cap.max_send_wr;
  attr->cap.max_recv_wr = a.cap.max_recv_wr;
  track(pd->context, &UContext::qps, ibv.qp_num, &ibv);
  return &ibv;
}


constexpr uint64_t kSendOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
                              IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                              IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;

ibv_qp* create_qp_ex(ibv_context*, ibv_qp_init_attr_ex* a) {
  uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || (a->comp_mask & ~known) ||
      ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags) ||
      ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (a->send_ops_flags & ~kSendOps))) {
    errno = EOPNOTSUPP;  // XRC, RSS, TSO, memory windows, creation flags ...
    return nullptr;
  }
  ibv_qp_init_attr b{};
  b.qp_context = a->qp_context;
  b.send_cq = a->send_cq;
  b.recv_cq = a->recv_cq;
  b.srq = a->srq;
  b.cap = a->cap;
  b.qp_type = a->qp_type;
  b.sq_sig_all = a->sq_sig_all;
  ibv_qp* qp = create_qp_common(a->pd, &b, (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ? a->send_ops_flags : 0);
  if (qp) a->cap = b.cap;
  return qp;
}

}  // namespace

extern "C" {

ibv_device** ibv_get_device_list(int* num) {
  auto** list = static_cast<ibv_device**>(calloc(2, sizeof(ibv_device*)));
  if (!list) {
    errno = ENOMEM;
    return nullptr;
  }
  list[0] = &g_device;
  if (num) *num = 1;
  return list;
}

void ibv_free_device_list(ibv_device** list) { free(list); }
const char* ibv_get_device_name(ibv_device* d) { return d->name; }
__be64 ibv_get_device_guid(ibv_device*) { return htobe64(0x02000000000000a5ull); }
int ibv_fork_init(void) { return 0; }

ibv_context* ibv_open_device(ibv_device* device) {
  auto dev = Device::open(device->name);
  if (!dev) return fail<ibv_context>(dev.error());
  auto* c = new UContext{};
  c->dev = std::move(*dev);
  ibv_context& ctx = c->vctx.context;
  ctx.device = device;
  ctx.cmd_fd = -1;
  ctx.async_fd = c->dev->async_fd();
  ctx.num_comp_vectors = 1;
  ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
  c->vctx.sz = sizeof(verbs_context);
  c->vctx.create_qp_ex = create_qp_ex;
  c->vctx.create_cq_ex = create_cq_ex;
  pthread_mutex_init(&ctx.mutex, nullptr);
  ibv_context_ops& ops = ctx.ops;
  ops.poll_cq = poll_cq;
  ops.req_notify_cq = req_notify_cq;
  ops.post_send = post_send;
  ops.post_recv = post_recv;
  ops.post_srq_recv = post_srq_recv;
  ops.alloc_mw = alloc_mw;
  ops.bind_mw = bind_mw;
  ops.dealloc_mw = dealloc_mw;
  return &ctx;
}

int ibv_close_device(ibv_context* ctx) {
  delete uctx(ctx);
  return 0;
}

int ibv_query_device(ibv_context* ctx, ibv_device_attr* a) {
  DeviceAttr d = uctx(ctx)->dev->query_device();
  *a = ibv_device_attr{};
  std::snprintf(a->fw_ver, sizeof a->fw_ver, "uroce 0.1");
  a->node_guid = ibv_get_device_guid(ctx->device);
  a->sys_image_guid = a->node_guid;
  a->max_mr_size = d.max_mr_size;
  a->page_size_cap = 4096;
  a->vendor_id = 0;
  a->max_qp = int(d.max_qp);
  a->max_qp_wr = int(d.max_qp_wr);
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_CHANGE_PHY_PORT;
  a->max_sge = int(d.max_sge);
  a->max_sge_rd = int(d.max_sge);
  a->max_cq = int(d.max_cq);
  a->max_cqe = int(d.max_cqe);
  a->max_mr = int(d.max_mr);
  a->max_pd = int(d.max_pd);
  a->max_qp_rd_atom = int(d.max_qp_rd_atom);
  a->max_res_rd_atom = int(d.max_qp_rd_atom) * int(d.max_qp);
  a->max_qp_init_rd_atom = int(d.max_qp_init_rd_atom);
  a->atomic_cap = IBV_ATOMIC_HCA;
  a->max_srq = int(d.max_qp);
  a->max_srq_wr = int(d.max_qp_wr);
  a->max_srq_sge = int(d.max_sge);
  a->max_pkeys = 1;
  a->local_ca_ack_delay = 15;
  a->phys_port_cnt = 1;
  return 0;
}

int ibv_query_port(ibv_context* ctx, uint8_t port, struct _compat_ibv_port_attr* out) {
  if (port != 1) return EINVAL;
  PortAttr p = uctx(ctx)->dev->query_port();
  auto* a = reinterpret_cast<ibv_port_attr*>(out);
  // The fields of the old, shorter layout only: callers may pass it.
  a->state = p.active ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  a->max_mtu = ibv_mtu(p.max_mtu);
  a->active_mtu = ibv_mtu(p.active_mtu);
  a->gid_tbl_len = int(p.gid_tbl_len);
  a->port_cap_flags = 0;
  a->max_msg_sz = 1u << 31;
  a->bad_pkey_cntr = a->qkey_viol_cntr = 0;
  a->pkey_tbl_len = 1;
  a->lid = a->sm_lid = 0;
  a->lmc = a->max_vl_num = a->sm_sl = a->subnet_timeout = a->init_type_reply = 0;
  a->max_vl_num = 1;
  a->active_width = 2;   // 4x
  a->active_speed = 32;  // 25 Gb/s per lane, as RoCE NICs report
  a->phys_state = 5;     // LinkUp
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
  a->flags = 0;
  return 0;
}

int ibv_query_gid(ibv_context* ctx, uint8_t port, int index, ibv_gid* gid) {
  if (port != 1) return EINVAL;
  auto g = uctx(ctx)->dev->query_gid(index);
  if (!g) return g.error().code;
  std::memcpy(gid->raw, g->raw.data(), 16);
  return 0;
}

int ibv_query_gid_type(ibv_context* ctx, uint8_t port, unsigned int index, int* type) {
  if (port != 1 || index >= uctx(ctx)->dev->query_port().gid_tbl_len) return EINVAL;
  *type = 1;  // RoCE v2
  return 0;
}

int ibv_query_pkey(ibv_context*, uint8_t port, int index, __be16* pkey) {
  if (port != 1 || index != 0) return EINVAL;
  *pkey = htons(0xffff);
  return 0;
}

int ibv_read_sysfs_file(const char*, const char*, char*, size_t) {
  errno = ENOENT;  // no sysfs: uroce devices live in the process
  return -1;
}

ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  auto pd = uctx(ctx)->dev->alloc_pd();
  if (!pd) return fail<ibv_pd>(pd.error());
  auto* p = new UPd{};
  p->pd = std::move(*pd);
  p->ibv.context = ctx;
  return &p->ibv;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  if (from<UPd>(pd)->pd->busy()) return EBUSY;  // as libibverbs: nothing changes
  delete from<UPd>(pd);
  return 0;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  if (access & ~0xf & ~IBV_ACCESS_RELAXED_ORDERING) {
    errno = EOPNOTSUPP;  // MW binding, zero-based, on-demand paging, ...
    return nullptr;
  }
  auto mr = from<UPd>(pd)->pd->reg_mr(addr, length, uint32_t(access) & 0xf);
  if (!mr) return fail<ibv_mr>(mr.error());
  auto* m = new UMr{};
  m->mr = std::move(*mr);
  m->ibv.context = pd->context;
  m->ibv.pd = pd;
  m->ibv.addr = addr;
  m->ibv.length = length;
  m->ibv.lkey = m->mr->lkey();
  m->ibv.rkey = m->mr->rkey();
  return &m->ibv;
}

int ibv_dereg_mr(ibv_mr* mr) {
  delete from<UMr>(mr);
  return 0;
}

ibv_comp_channel* ibv_create_comp_channel(ibv_context* ctx) {
  int fd = epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) return nullptr;
  auto* c = new UChannel{};
  c->ibv.context = ctx;
  c->ibv.fd = fd;
  return &c->ibv;
}

int ibv_destroy_comp_channel(ibv_comp_channel* ch) {
  if (ch->refcnt) return EBUSY;
  close(ch->fd);
  delete from<UChannel>(ch);
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel, int) {
  if (cqe <= 0) {
    errno = EINVAL;
    return nullptr;
  }
  UCq* c = new_cq(ctx, uint32_t(cqe), cq_context, channel);
  return c ? ibv_cq_ex_to_cq(&c->ibv) : nullptr;
}

int ibv_destroy_cq(ibv_cq* cq) {
  UCq* c = from<UCq>(cq);
  if (c->cq->busy()) return EBUSY;
  if (cq->channel) {
    epoll_ctl(cq->channel->fd, EPOLL_CTL_DEL, c->cq->fd(), nullptr);
    --cq->channel->refcnt;
  }
  delete c;
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* ch, ibv_cq** cq, void** cq_context) {
  epoll_event ev;
  int n;
  do n = epoll_wait(ch->fd, &ev, 1, -1);
  while (n < 0 && errno == EINTR);
  if (n != 1) return -1;
  UCq* c = static_cast<UCq*>(ev.data.ptr);
  uint64_t v;
  (void)!read(c->cq->fd(), &v, sizeof v);
  *cq = ibv_cq_ex_to_cq(&c->ibv);
  *cq_context = c->ibv.cq_context;
  return 0;
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int n) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += n;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
  auto srq = from<UPd>(pd)->pd->create_srq(attr->attr.max_wr, attr->attr.max_sge, attr->attr.srq_limit);
  if (!srq) return fail<ibv_srq>(srq.error());
  auto* s = new USrq{};
  s->srq = std::move(*srq);
  s->ibv.context = pd->context;
  s->ibv.srq_context = attr->srq_context;
  s->ibv.pd = pd;
  s->ibv.handle = s->srq->handle();
  attr->attr.max_wr = s->srq->capacity();
  pthread_mutex_init(&s->ibv.mutex, nullptr);
  pthread_cond_init(&s->ibv.cond, nullptr);
  track(pd->context, &UContext::srqs, s->ibv.handle, &s->ibv);
  return &s->ibv;
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
  track<ibv_srq>(srq->context, &UContext::srqs, srq->handle, nullptr);
  delete from<USrq>(srq);
  return 0;
}

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) { return create_qp_common(pd, attr, 0); }

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  if ((mask & IBV_QP_AV) && !attr->ah_attr.is_global) return EINVAL;  // RoCE needs the GID (-g)
  Status s = from<UQp>(qp)->qp->modify(to_attr(attr, mask), uint32_t(mask));
  if (!s) return s.error().code;
  if (mask & IBV_QP_STATE) qp->state = attr->qp_state;
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

int ibv_destroy_qp(ibv_qp* qp) {
  track<ibv_qp>(qp->context, &UContext::qps, qp->qp_num, nullptr);
  delete from<UQp>(qp);
  return 0;
}

ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  if (!attr->is_global) {
    errno = EINVAL;  // RoCE addresses need a GRH with the destination GID
    return nullptr;
  }
  auto* a = new UAh{};
  std::memcpy(a->ah.dgid.raw.data(), attr->grh.dgid.raw, 16);
  a->ah.sgid_index = attr->grh.sgid_index;
  if (a->ah.dgid == Gid{}) {
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
  delete from<UAh>(ah);
  return 0;
}

int ibv_get_async_event(ibv_context* ctx, ibv_async_event* event) {
  UContext* c = uctx(ctx);
  for (;;) {
    auto e = c->dev->get_async_event();
    if (e) {
      event->event_type = ibv_event_type(e->type);
      std::lock_guard g(c->mu);
      switch (e->type) {
        case AsyncEventType::QpFatal:
        case AsyncEventType::QpLastWqeReached:
          event->element.qp = c->qps.count(e->qp_num) ? c->qps[e->qp_num] : nullptr;
          break;
        case AsyncEventType::SrqLimitReached:
          event->element.srq = c->srqs.count(e->srq_handle) ? c->srqs[e->srq_handle] : nullptr;
          break;
        case AsyncEventType::CqErr:
          event->element.cq = nullptr;
          break;
        case AsyncEventType::PortActive:
          event->element.port_num = e->port_num;
          break;
      }
      return 0;
    }
    pollfd p{c->dev->async_fd(), POLLIN, 0};  // blocks until an event is queued
    (void)poll(&p, 1, -1);
  }
}

void ibv_ack_async_event(ibv_async_event*) {}

ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  UQp* q = from<UQp>(qp);
  if (!q->qpx.wr_start) {  // created without send_ops_flags
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return &q->qpx;
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

int _ibv_query_gid_ex(ibv_context* ctx, uint32_t port, uint32_t index, ibv_gid_entry* entry, uint32_t flags,
                      size_t size) {
  if (flags || size < sizeof(ibv_gid_entry)) return EINVAL;
  ibv_gid gid;
  if (int rc = ibv_query_gid(ctx, uint8_t(port), int(index), &gid)) return rc;
  *entry = ibv_gid_entry{};
  entry->gid = gid;
  entry->gid_index = index;
  entry->port_num = port;
  entry->gid_type = IBV_GID_TYPE_ROCE_V2;
  return 0;
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access) {
  if (iova != uint64_t(addr)) {
    errno = EOPNOTSUPP;  // remote addresses are virtual addresses: no other IOVA
    return nullptr;
  }
  return ibv_reg_mr(pd, addr, length, int(access));
}

int ibv_get_pkey_index(ibv_context*, uint8_t port, __be16 pkey) {
  return port == 1 && ntohs(pkey) == 0xffff ? 0 : -1;
}

int ibv_get_device_index(ibv_device*) { return 0; }
int ibv_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t) { return EOPNOTSUPP; }
int ibv_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t) { return EOPNOTSUPP; }
int ibv_query_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
int ibv_set_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }

// Kernel-ABI helpers that librdmacm imports; uroce has no kernel side to copy from.
void ibv_copy_ah_attr_from_kern(void*, const void*) {}
void ibv_copy_qp_attr_from_kern(void*, const void*) {}
void ibv_copy_path_rec_from_kern(void*, const void*) {}
const char* ibv_get_sysfs_path(void) { return nullptr; }

// ---- the rest of rdma-core 44's public ABI: real where uroce can, a clean error where not.

namespace {
struct RateRow {
  ibv_rate rate;
  int mult;
  int mbps;
};
constexpr RateRow kRates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},      {IBV_RATE_5_GBPS, 2, 5000},        {IBV_RATE_10_GBPS, 4, 10000},
    {IBV_RATE_20_GBPS, 8, 20000},      {IBV_RATE_30_GBPS, 12, 30000},     {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},     {IBV_RATE_80_GBPS, 32, 80000},     {IBV_RATE_120_GBPS, 48, 120000},
    {IBV_RATE_14_GBPS, -1, 14062},     {IBV_RATE_56_GBPS, -1, 56250},     {IBV_RATE_112_GBPS, -1, 112500},
    {IBV_RATE_168_GBPS, -1, 168750},   {IBV_RATE_25_GBPS, -1, 25781},     {IBV_RATE_100_GBPS, -1, 103125},
    {IBV_RATE_200_GBPS, -1, 206250},   {IBV_RATE_300_GBPS, -1, 309375},   {IBV_RATE_28_GBPS, -1, 28125},
    {IBV_RATE_50_GBPS, -1, 53125},     {IBV_RATE_400_GBPS, -1, 425000},   {IBV_RATE_600_GBPS, -1, 637500},
};
}  // namespace

extern "C++" {
namespace {
template <class K, class V>
V rate_lookup(K RateRow::*key, K k, V RateRow::*val, V none) {
  for (const RateRow& r : kRates)
    if (r.*key == k && r.*key != K(-1) && r.*val != V(-1)) return r.*val;  // -1: no such value
  return none;
}
}  // namespace
}

int ibv_rate_to_mult(ibv_rate rate) { return rate_lookup(&RateRow::rate, rate, &RateRow::mult, -1); }
ibv_rate mult_to_ibv_rate(int mult) { return rate_lookup(&RateRow::mult, mult, &RateRow::rate, IBV_RATE_MAX); }
int ibv_rate_to_mbps(ibv_rate rate) { return rate_lookup(&RateRow::rate, rate, &RateRow::mbps, -1); }
ibv_rate mbps_to_ibv_rate(int mbps) { return rate_lookup(&RateRow::mbps, mbps, &RateRow::rate, IBV_RATE_MAX); }

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

ssize_t _ibv_query_gid_table(ibv_context* ctx, ibv_gid_entry* entries, size_t max, uint32_t flags, size_t size) {
  uint32_t n = uctx(ctx)->dev->query_port().gid_tbl_len;
  if (max < n) return -EINVAL;
  for (uint32_t i = 0; i < n; ++i)
    if (int rc = _ibv_query_gid_ex(ctx, 1, i, reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<char*>(entries) + i * size),
                                   flags, size))
      return -rc;
  return ssize_t(n);
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, unsigned(access));
}

int ibv_dofork_range(void*, size_t) { return 0; }    // nothing is pinned by a kernel driver
int ibv_dontfork_range(void*, size_t) { return 0; }
ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }
int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) { return 0; }  // no promise made

int ibv_rereg_mr(ibv_mr*, int, ibv_pd*, void*, size_t, int) {
  errno = EOPNOTSUPP;
  return IBV_REREG_MR_ERR_INPUT;
}
int ibv_resize_cq(ibv_cq*, int) { return EOPNOTSUPP; }
int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, uint8_t[6], uint16_t*) { return EOPNOTSUPP; }
ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  errno = EOPNOTSUPP;
  return nullptr;
}
// Sharing objects with another process's context needs a kernel; uroce has none.
ibv_context* ibv_import_device(int) {
  errno = EOPNOTSUPP;
  return nullptr;
}
ibv_pd* ibv_import_pd(ibv_context*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
ibv_dm* ibv_import_dm(ibv_context*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
void ibv_unimport_pd(ibv_pd*) {}
void ibv_unimport_mr(ibv_mr*) {}
void ibv_unimport_dm(ibv_dm*) {}
void ibv_copy_path_rec_to_kern(void*, const void*) {}

const char* ibv_wc_status_str(ibv_wc_status status) { return to_string(WcStatus(status)); }

const char* ibv_node_type_str(ibv_node_type t) {
  if (t == IBV_NODE_CA) return "InfiniBand channel adapter";
  if (t == IBV_NODE_RNIC) return "iWARP NIC";
  return "unknown";
}

const char* ibv_port_state_str(ibv_port_state s) {
  static const char* names[] = {"PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER"};
  return unsigned(s) < 6 ? names[s] : "unknown";
}

const char* ibv_event_type_str(ibv_event_type e) { return to_string(AsyncEventType(e)); }

}  // extern "C"

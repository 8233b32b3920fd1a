// The drop-in's extended send API (ibv_qp_ex: ibv_wr_start .. ibv_wr_complete) and
// ibv_create_qp_ex.
#include <arpa/inet.h>
#include <sched.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "compat/internal.hpp"

using namespace uroce;
using namespace uroce::compat;

namespace uroce::compat {

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
    if (p.wr.opcode == WrOpcode::BindMw) p.wr.bind = &p.bind;
    if (Status s = q->qp->post_send(p.wr); !s) err = s.error().code;
  }
  q->batch_len = 0;
  q->batch_err = 0;
  return err;
}

void x_send(ibv_qp_ex* qx) { next_wr(qx, WrOpcode::Send); }
void x_send_imm(ibv_qp_ex* qx, __be32 imm) { next_wr(qx, WrOpcode::SendWithImm).wr.imm_data = ntohl(imm); }
// A request that names remote memory: READ, WRITE and the atomics.
PendingWr& next_remote(ibv_qp_ex* qx, WrOpcode op, uint32_t rkey, uint64_t addr) {
  PendingWr& p = next_wr(qx, op);
  p.wr.rkey = rkey;
  p.wr.remote_addr = addr;
  return p;
}
void x_rdma_write(ibv_qp_ex* qx, uint32_t rkey, uint64_t addr) { next_remote(qx, WrOpcode::RdmaWrite, rkey, addr); }
void x_rdma_write_imm(ibv_qp_ex* qx, uint32_t rkey, uint64_t addr, __be32 imm) {
  next_remote(qx, WrOpcode::RdmaWriteWithImm, rkey, addr).wr.imm_data = ntohl(imm);
}
void x_rdma_read(ibv_qp_ex* qx, uint32_t rkey, uint64_t addr) { next_remote(qx, WrOpcode::RdmaRead, rkey, addr); }
void x_cmp_swp(ibv_qp_ex* qx, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap) {
  PendingWr& p = next_remote(qx, WrOpcode::AtomicCmpSwp, rkey, addr);
  p.wr.compare_add = compare;
  p.wr.swap = swap;
}
void x_fetch_add(ibv_qp_ex* qx, uint32_t rkey, uint64_t addr, uint64_t add) {
  next_remote(qx, WrOpcode::AtomicFetchAdd, rkey, addr).wr.compare_add = add;
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
void x_send_inv(ibv_qp_ex* qx, uint32_t rkey) { next_wr(qx, WrOpcode::SendWithInv).wr.invalidate_rkey = rkey; }
void x_local_inv(ibv_qp_ex* qx, uint32_t rkey) { next_wr(qx, WrOpcode::LocalInv).wr.invalidate_rkey = rkey; }
void x_bind_mw(ibv_qp_ex* qx, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
  PendingWr& p = next_wr(qx, WrOpcode::BindMw);
  if (!mw || !info) {
    uqp(qx)->batch_err = EINVAL;
    return;
  }
  if (Status s = to_mw_bind(mw, rkey, *info, p.bind); !s) uqp(qx)->batch_err = s.error().code;
}
// XRC: the XRC SRQ at the target the request goes to.
void x_set_xrc_srqn(ibv_qp_ex* qx, uint32_t remote_srqn) {
  if (PendingWr* p = current(qx)) p->wr.remote_srqn = remote_srqn;
}
// Operations uroce does not have: the batch fails at ibv_wr_complete.
void x_unsupported_tso(ibv_qp_ex* qx, void*, uint16_t, uint16_t) { uqp(qx)->batch_err = EOPNOTSUPP; }
// ATOMIC WRITE: its 8 bytes are read now, as rxe's provider does.
void x_atomic_write(ibv_qp_ex* qx, uint32_t rkey, uint64_t addr, const void* atomic_wr) {
  PendingWr& p = next_remote(qx, WrOpcode::AtomicWrite, rkey, addr);
  if (!atomic_wr) {
    uqp(qx)->batch_err = EINVAL;
    return;
  }
  std::memcpy(&p.wr.compare_add, atomic_wr, 8);
}
void x_flush(ibv_qp_ex* qx, uint32_t rkey, uint64_t addr, size_t len, uint8_t type, uint8_t level) {
  PendingWr& p = next_remote(qx, WrOpcode::Flush, rkey, addr);
  if (len > UINT32_MAX) uqp(qx)->batch_err = EINVAL;
  p.wr.flush_length = uint32_t(len);
  p.wr.flush_type = type;  // IBV_FLUSH_GLOBAL/PERSISTENT are FlushType's bits
  p.wr.flush_level = FlushLevel(level);  // IBV_FLUSH_RANGE/MR: post_send checks it
}

void set_send_ops(QpExFlush& xf) {
  ibv_qp_ex& x = xf.base;
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
  x.wr_local_inv = x_local_inv;
  x.wr_send_inv = x_send_inv;
  x.wr_set_xrc_srqn = x_set_xrc_srqn;
  x.wr_bind_mw = x_bind_mw;
  x.wr_send_tso = x_unsupported_tso;
  x.wr_atomic_write = x_atomic_write;
  xf.wr_flush = x_flush;
}

constexpr uint64_t kSendOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
                              IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                              IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
                              IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV |
                              IBV_QP_EX_WITH_ATOMIC_WRITE | kIbvQpExWithFlush;

ibv_qp* create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* a) {
  uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS |
                   IBV_QP_INIT_ATTR_XRCD;
  if (a->qp_type == IBV_QPT_XRC_RECV && !(a->comp_mask & ~known) && !(a->comp_mask & IBV_QP_INIT_ATTR_PD))
    return create_xrc_target(ctx, a);  // no PD, no CQs: its XRC domain's
  if (a->comp_mask & (IBV_QP_INIT_ATTR_RX_HASH | IBV_QP_INIT_ATTR_IND_TABLE)) return create_rss_qp(ctx, a);
  if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || (a->comp_mask & ~known) || (a->comp_mask & IBV_QP_INIT_ATTR_XRCD) ||
      ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags) ||
      ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (a->send_ops_flags & ~kSendOps))) {
    errno = EOPNOTSUPP;  // TSO, creation flags ...
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


}  // namespace uroce::compat

extern "C" {

ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  UQp* q = from<UQp>(qp);
  if (!q->qpx.base.wr_start) {  // created without send_ops_flags
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return &q->qpx.base;
}

}  // extern "C"

// Memory regions (registration at an address or an IOVA, reregistration), memory windows and
// device memory, as libibverbs' calls and provider operations.
#include <cerrno>
#include <cstring>

#include "compat/internal.hpp"

using namespace uroce;
using namespace uroce::compat;

// The header routes these through inline wrappers; the library defines the functions.
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace {

// The access rights uroce's MRs have (the same bits as libibverbs'); optional flags
// (IBV_ACCESS_OPTIONAL_RANGE, such as relaxed ordering) a device may ignore, and does, as it
// ignores IBV_ACCESS_HUGETLB, a hint. -1 for flags it does not offer: zero-based (device
// memory only), ... FLUSH_PERSISTENT passes, for reg_mr to refuse with its reason.
int64_t rights(unsigned access) {
  access &= ~(unsigned(IBV_ACCESS_OPTIONAL_RANGE) | unsigned(IBV_ACCESS_HUGETLB));
  constexpr unsigned kOffered = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ON_DEMAND |
                                kIbvAccessFlushGlobal | kIbvAccessFlushPersistent;
  static_assert(unsigned(IBV_ACCESS_MW_BIND) == kAccessMwBind && unsigned(IBV_ACCESS_ON_DEMAND) == kAccessOnDemand &&
                kIbvAccessFlushGlobal == kAccessFlushGlobal && kIbvAccessFlushPersistent == kAccessFlushPersistent);
  return access & ~kOffered ? -1 : int64_t(access);
}

ibv_mr* made(Result<std::unique_ptr<MemoryRegion>> mr, ibv_pd* pd) {
  if (!mr) return fail<ibv_mr>(mr.error());
  auto* m = new UMr{};
  m->mr = std::move(*mr);
  m->ibv.context = pd->context;
  m->ibv.pd = pd;
  m->ibv.addr = m->mr->addr();
  m->ibv.length = m->mr->length();
  m->ibv.lkey = m->mr->lkey();
  m->ibv.rkey = m->mr->rkey();
  m->ibv.handle = m->ibv.lkey;  // unique on the device while it lives
  ++from<UPd>(pd)->objects;
  UDevice& d = *uctx(pd->context)->shared;
  std::lock_guard g(d.mu);
  d.mrs[m->ibv.handle] = m;
  return &m->ibv;
}

int to_dm(ibv_dm* dm, uint64_t offset, const void* src, size_t len) {
  Status s = from<UDm>(dm)->dm->copy_to(offset, src, len);
  return s ? 0 : s.error().code;
}

int from_dm(void* dst, ibv_dm* dm, uint64_t offset, size_t len) {
  Status s = from<UDm>(dm)->dm->copy_from(dst, offset, len);
  return s ? 0 : s.error().code;
}

}  // namespace

namespace uroce::compat {

Status to_mw_bind(const ibv_mw* mw, uint32_t new_rkey, const ibv_mw_bind_info& b, MwBind& out) {
  // Zero-based windows are not offered; the rest of the flags are the window's rights.
  if (b.mw_access_flags & ~unsigned(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                    IBV_ACCESS_REMOTE_ATOMIC))
    return make_error(EINVAL, "bind_mw: unsupported access flags");
  if (!b.mr && b.length) return make_error(EINVAL, "bind_mw: a range needs its memory region");
  out = MwBind{from<UMw>(const_cast<ibv_mw*>(mw))->mw->handle(), new_rkey, b.mr ? b.mr->lkey : 0, b.addr, b.length,
               b.mw_access_flags};
  return {};
}

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  auto mw = from<UPd>(pd)->pd->alloc_mw(uint8_t(type));
  if (!mw) return fail<ibv_mw>(mw.error());
  auto* m = new UMw{};
  m->mw = std::move(*mw);
  m->ibv.context = pd->context;
  m->ibv.pd = pd;
  m->ibv.rkey = m->mw->rkey();
  m->ibv.handle = m->mw->handle();
  m->ibv.type = type;
  ++from<UPd>(pd)->objects;
  return &m->ibv;
}

int dealloc_mw(ibv_mw* mw) {
  --from<UPd>(mw->pd)->objects;
  delete from<UMw>(mw);
  return 0;
}

// A type 1 window binds through the QP (rdma-core's ibv_bind_mw): a BIND_MW work request with
// the next rkey, which mw->rkey names from the post on, as rxe's and mlx5's providers do.
int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mb) {
  // An XRC target has no PD (and sends nothing): no window binds through it.
  if (mw->type != IBV_MW_TYPE_1 || !qp->pd || from<UPd>(qp->pd)->pd != from<UPd>(mw->pd)->pd) return EINVAL;
  const uint32_t next = ibv_inc_rkey(mw->rkey);
  MwBind b;
  if (Status s = to_mw_bind(mw, next, mb->bind_info, b); !s) return s.error().code;
  SendWr w;
  w.wr_id = mb->wr_id;
  w.opcode = WrOpcode::BindMw;
  w.send_flags = mb->send_flags & (IBV_SEND_SIGNALED | IBV_SEND_FENCE);
  w.bind = &b;
  if (Status s = from<UQp>(qp)->qp->post_send(w); !s) return s.error().code;
  mw->rkey = next;
  return 0;
}

int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list, uint32_t num_sge) {
  if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
      advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
    return EOPNOTSUPP;
  if ((flags & ~uint32_t(IBV_ADVISE_MR_FLAG_FLUSH)) || !num_sge || !sg_list) return EINVAL;
  Status s = from<UPd>(pd)->pd->prefetch({reinterpret_cast<const Sge*>(sg_list), num_sge},
                                         advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT);
  return s ? 0 : s.error().code;
}

ibv_dm* alloc_dm(ibv_context* ctx, ibv_alloc_dm_attr* attr) {
  // Any alignment up to a cache line: the memory starts on one.
  if (!attr || attr->comp_mask || attr->log_align_req > 6) return fail<ibv_dm>(Error{EINVAL, ""});
  auto dm = uctx(ctx)->dev->alloc_dm(attr->length);
  if (!dm) return fail<ibv_dm>(dm.error());
  auto* d = new UDm{};
  d->dm = std::move(*dm);
  d->ibv.context = ctx;
  d->ibv.memcpy_to_dm = to_dm;
  d->ibv.memcpy_from_dm = from_dm;
  UDevice& u = *uctx(ctx)->shared;
  std::lock_guard g(u.mu);
  d->ibv.handle = u.next_handle++;
  u.dms[d->ibv.handle] = d;
  return &d->ibv;
}

int free_dm(ibv_dm* dm) {
  UDm* d = from<UDm>(dm);
  if (!d->imported) {
    if (d->dm->busy()) return EBUSY;  // memory regions lie on it
    UDevice& u = *uctx(dm->context)->shared;
    std::lock_guard g(u.mu);
    u.dms.erase(dm->handle);
  }
  delete d;
  return 0;
}

ibv_mr* reg_dm_mr(ibv_pd* pd, ibv_dm* dm, uint64_t offset, size_t length, unsigned int access) {
  // Device memory is named from 0 (IBV_ACCESS_ZERO_BASED), as mlx5 requires too.
  const int64_t r = rights(access & ~unsigned(IBV_ACCESS_ZERO_BASED));
  if (!(access & IBV_ACCESS_ZERO_BASED) || r < 0) return fail<ibv_mr>(Error{EINVAL, ""});
  auto mr = from<UPd>(pd)->pd->reg_dm_mr(*from<UDm>(dm)->dm, offset, length, uint32_t(r));
  ibv_mr* m = made(std::move(mr), pd);
  if (m) m->addr = nullptr;  // zero-based
  return m;
}

}  // namespace uroce::compat

extern "C" {

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access) {
  const int64_t r = rights(access);
  if (r < 0) return fail<ibv_mr>(Error{EOPNOTSUPP, ""});
  return made(from<UPd>(pd)->pd->reg_mr(addr, length, iova, uint32_t(r)), pd);
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<uint64_t>(addr), unsigned(access));
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, unsigned(access));
}

int ibv_dereg_mr(ibv_mr* mr) {
  UMr* m = from<UMr>(mr);
  if (!m->mr) {  // an imported region: its owner deregisters it
    ibv_unimport_mr(mr);
    return 0;
  }
  if (m->mr->windows()) return EBUSY;  // memory windows are bound to it
  --from<UPd>(mr->pd)->objects;
  {
    UDevice& d = *uctx(mr->context)->shared;
    std::lock_guard g(d.mu);
    d.mrs.erase(mr->handle);
  }
  delete m;
  return 0;
}

// libibverbs' input rules first (IBV_REREG_MR_ERR_INPUT), then the device's
// (IBV_REREG_MR_ERR_CMD); either way errno says why and the region is as it was.
int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
  auto input = [](int e) {
    errno = e;
    return int(IBV_REREG_MR_ERR_INPUT);
  };
  if (!flags || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED)) return input(EINVAL);
  if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !length)) return input(EINVAL);
  if (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS)) return input(EINVAL);
  if ((flags & IBV_REREG_MR_CHANGE_PD) && !pd) return input(EINVAL);
  MrChange c;
  if (flags & IBV_REREG_MR_CHANGE_PD) c.pd = from<UPd>(pd)->pd.get();
  if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
    c.addr = addr;
    c.length = length;
  }
  if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
    const int64_t r = rights(unsigned(access));
    if (r < 0) return input(EOPNOTSUPP);
    c.access = uint32_t(r);
  }
  UMr* m = from<UMr>(mr);
  if (Status s = m->mr->rereg(c); !s) {
    errno = s.error().code;
    return IBV_REREG_MR_ERR_CMD;
  }
  if (c.pd) {
    --from<UPd>(mr->pd)->objects;
    ++from<UPd>(pd)->objects;
    mr->pd = pd;
  }
  mr->addr = m->mr->addr();
  mr->length = m->mr->length();
  return 0;
}

}  // extern "C"

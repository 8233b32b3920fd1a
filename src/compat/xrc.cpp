// The drop-in's XRC (ibv_open_xrcd, ibv_create_srq_ex, ibv_get_srq_num, XRC QPs through
// ibv_create_qp_ex): each ibv_* object owns its C++ one (api/xrc.cpp). Opening one file twice
// gives the same domain, within this process; another process's domain is never shared.
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <mutex>

#include "compat/internal.hpp"

namespace uroce::compat {

ibv_srq* made_srq(ibv_pd* pd, std::unique_ptr<SharedReceiveQueue> srq, void* srq_context) {
  auto* s = new USrq{};
  s->srq = std::move(srq);
  s->ibv.context = pd->context;
  s->ibv.srq_context = srq_context;
  s->ibv.pd = pd;
  s->ibv.handle = s->srq->handle();
  pthread_mutex_init(&s->ibv.mutex, nullptr);
  pthread_cond_init(&s->ibv.cond, nullptr);
  track(pd->context, &UDevice::srqs, s->ibv.handle, &s->ibv);
  ++from<UPd>(pd)->objects;
  return &s->ibv;
}

// As the kernel's: fd -1 is a domain of its own; a file's domain is found (O_CREAT makes it if
// there is none; O_EXCL refuses one that exists; both refusals are EINVAL).
ibv_xrcd* open_xrcd(ibv_context* ctx, ibv_xrcd_init_attr* attr) {
  constexpr uint32_t kKnown = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  if (!attr || (attr->comp_mask & ~kKnown) || !(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) ||
      !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) || (attr->oflags & ~(O_CREAT | O_EXCL)))
    return fail<ibv_xrcd>(Error{EINVAL, ""});
  UDevice& d = *uctx(ctx)->shared;
  std::shared_ptr<XrcDomain> dom;
  std::unique_lock<std::mutex> files;  // held from the lookup to the insert: one domain per file
  std::pair<uint64_t, uint64_t> key{};
  if (attr->fd != -1) {
    struct stat st;
    if (fstat(attr->fd, &st) != 0) return fail<ibv_xrcd>(Error{EBADF, ""});
    key = {uint64_t(st.st_dev), uint64_t(st.st_ino)};
    files = std::unique_lock(d.mu);
    auto it = d.xrcd_files.find(key);
    dom = it != d.xrcd_files.end() ? it->second.lock() : nullptr;
    if ((dom && (attr->oflags & O_EXCL)) || (!dom && !(attr->oflags & O_CREAT)))
      return fail<ibv_xrcd>(Error{EINVAL, ""});  // as the kernel answers both
  } else if (!(attr->oflags & O_CREAT)) {
    return fail<ibv_xrcd>(Error{EINVAL, ""});
  }
  if (!dom) {
    auto made = uctx(ctx)->dev->open_xrcd();  // the engine's lock, inside d.mu: nothing takes them the other way
    if (!made) return fail<ibv_xrcd>(made.error());
    dom = std::move(*made);
    if (attr->fd != -1) {
      std::erase_if(d.xrcd_files, [](const auto& f) { return f.second.expired(); });  // closed since
      d.xrcd_files[key] = dom;
    }
  }
  auto* x = new UXrcd{};
  x->ibv.context = ctx;
  x->xrcd = std::move(dom);
  return &x->ibv;
}

int close_xrcd(ibv_xrcd* xrcd) {
  if (!xrcd) return EINVAL;
  UXrcd* x = from<UXrcd>(xrcd);
  if (x->objects) return EBUSY;  // its SRQs and target QPs first
  delete x;
  return 0;
}

ibv_srq* create_srq_ex(ibv_context* ctx, ibv_srq_init_attr_ex* a) {
  constexpr uint32_t kKnown = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
                              IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
  if (!a || (a->comp_mask & ~kKnown)) return fail<ibv_srq>(Error{EOPNOTSUPP, ""});
  const bool typed = a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE;
  const bool xrc = typed && a->srq_type == IBV_SRQT_XRC, tm = typed && a->srq_type == IBV_SRQT_TM;
  if (typed && a->srq_type != IBV_SRQT_BASIC && !xrc && !tm) return fail<ibv_srq>(Error{EOPNOTSUPP, ""});
  if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd || a->pd->context != ctx) return fail<ibv_srq>(Error{EINVAL, ""});
  if (tm) return create_tm_srq(ctx, a);  // compat/tag_matching.cpp
  if (!xrc) {
    ibv_srq_init_attr basic{a->srq_context, a->attr};
    ibv_srq* s = ibv_create_srq(a->pd, &basic);
    if (s) a->attr = basic.attr;
    return s;
  }
  if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !(a->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !a->xrcd || !a->cq)
    return fail<ibv_srq>(Error{EINVAL, ""});
  UXrcd* x = from<UXrcd>(a->xrcd);
  auto srq = from<UPd>(a->pd)->pd->create_xrc_srq(*x->xrcd, *from<UCq>(a->cq)->cq, a->attr.max_wr, a->attr.max_sge,
                                                  a->attr.srq_limit);
  if (!srq) return fail<ibv_srq>(srq.error());
  ibv_srq* s = made_srq(a->pd, std::move(*srq), a->srq_context);
  from<USrq>(s)->xrcd = x;
  ++x->objects;
  a->attr.max_wr = from<USrq>(s)->srq->capacity();
  return s;
}

int get_srq_num(ibv_srq* srq, uint32_t* srq_num) {
  if (!srq || !srq_num || !from<USrq>(srq)->xrcd) return EINVAL;  // only an XRC SRQ has a number to name
  *srq_num = from<USrq>(srq)->srq->handle();
  return 0;
}

ibv_qp* create_xrc_target(ibv_context* ctx, ibv_qp_init_attr_ex* a) {
  if (!(a->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !a->xrcd || a->xrcd->context != ctx)
    return fail<ibv_qp>(Error{EINVAL, ""});
  UXrcd* x = from<UXrcd>(a->xrcd);
  auto qp = x->xrcd->create_target_qp();
  if (!qp) return fail<ibv_qp>(qp.error());
  UQp* q = made_qp(ctx, nullptr, std::move(*qp), IBV_QPT_XRC_RECV, a->qp_context);
  q->xrcd = x;
  ++x->objects;
  a->cap = {};
  return &q->qpx.base.qp_base;
}

}  // namespace uroce::compat

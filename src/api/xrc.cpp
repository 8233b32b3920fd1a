// XRC's public objects: domains, their SRQs and target QPs (the protocol core's xrc.cpp). Each
// holds what it uses: an XRC SRQ its domain, PD and CQ; a target QP its domain.
#include <cerrno>

#include "api/holds.hpp"
#include "uroce/uroce.hpp"

namespace uroce {

Result<std::unique_ptr<XrcDomain>> Device::open_xrcd() {
  auto g = stack_->lock();
  auto x = stack_->pc->create_xrcd();
  if (!x) return x.error();
  std::unique_ptr<XrcDomain> d(new XrcDomain);
  d->h_ = std::make_shared<detail::XrcdHold>(stack_, *x);
  return d;
}

XrcDomain::~XrcDomain() = default;

bool XrcDomain::busy() const {
  auto g = h_->stack->lock();
  return h_->stack->pc->xrcd_busy(h_->xrcd);
}

Result<std::unique_ptr<QueuePair>> XrcDomain::create_target_qp() {
  auto& stack = h_->stack;
  auto g = stack->lock();
  auto qp = stack->pc->create_xrc_tgt(h_->xrcd);
  if (!qp) return qp.error();
  std::unique_ptr<QueuePair> q(new QueuePair);
  q->stack_ = stack;
  q->xrcd_ = h_;
  q->qp_ = *qp;
  return q;
}

Result<std::unique_ptr<SharedReceiveQueue>> ProtectionDomain::create_xrc_srq(XrcDomain& xrcd, CompletionQueue& cq,
                                                                             uint32_t max_wr, uint32_t max_sge,
                                                                             uint32_t limit) {
  auto& stack = h_->stack;
  if (xrcd.h_->stack != stack || cq.h_->stack != stack)
    return make_error(EINVAL, "create_srq: the XRC domain and CQ must be of this device");
  auto g = stack->lock();
  auto q = wrap_srq(stack->pc->create_xrc_srq(h_->pd, xrcd.h_->xrcd, cq.h_->cq, max_wr, max_sge), limit);
  if (q) {
    (*q)->h_->xrcd = xrcd.h_;
    (*q)->h_->cq = cq.h_;
  }
  return q;
}

}  // namespace uroce

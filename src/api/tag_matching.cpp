// Tag matching SRQs through the public API (transport/tag_matching.cpp does the work).
#include "api/device_stack.hpp"
#include "api/holds.hpp"
#include "uroce/uroce.hpp"

namespace uroce {

Result<std::unique_ptr<SharedReceiveQueue>> ProtectionDomain::create_tm_srq(CompletionQueue& cq, uint32_t max_wr,
                                                                            uint32_t max_sge, uint32_t max_tags,
                                                                            uint32_t max_ops) {
  auto& stack = h_->stack;
  if (cq.h_->stack != stack) return make_error(EINVAL, "create_srq: the CQ must be of this device");
  auto g = stack->lock();
  auto q = wrap_srq(stack->pc->create_tm_srq(h_->pd, cq.h_->cq, max_wr, max_sge, max_tags, max_ops), 0);
  if (q) (*q)->h_->cq = cq.h_;
  return q;
}

Status SharedReceiveQueue::post_ops(std::span<TmOp> ops, size_t* bad) {
  auto& stack = h_->stack;
  auto g = stack->lock();
  return stack->pc->post_srq_ops(*h_->srq, ops, bad);  // the lock's release signals what they made
}

uint32_t SharedReceiveQueue::max_tags() const { return h_->srq->tm ? h_->srq->tm->capacity() : 0; }

}  // namespace uroce

// Raw packet QPs through the public API: their port on the interface, their flow rules, and
// receive-side scaling (work queues and RSS QPs).
#include "api/device_stack.hpp"
#include "api/holds.hpp"
#include "link/iface.hpp"
#include "uroce/uroce.hpp"
#include "verbs/qp.hpp"

namespace uroce {

Status detail::hold_raw_port(DeviceStack& stack, transport::Qp* made) {
  if (stack.raw_qps) {
    ++stack.raw_qps;
    return {};
  }
  auto opened = [&]() -> Status {
    const link::Interface itf = link::find_interface(stack.link->gids().front());
    if (itf.name.empty()) return make_error(ENODEV, "raw packet QP: the device's address is on no interface");
    auto port = link::RawPort::open(itf.index, itf.loopback);
    if (!port) return port.error();
    stack.pc->set_raw_frame_max(itf.mtu + 18);  // the interface's MTU (not RoCE's), a header and a VLAN tag
    return stack.engine->attach_raw(std::move(*port));
  }();
  if (!opened) {
    (void)stack.pc->destroy_qp(made);
    return opened;
  }
  stack.raw_qps = 1;
  return {};
}

void detail::release_raw_port(DeviceStack& stack) {
  if (stack.raw_qps && --stack.raw_qps == 0) stack.engine->detach_raw();  // nothing else pays for it
}

Result<uint32_t> QueuePair::create_flow(const FlowRule& rule) {
  auto g = stack_->lock();
  return stack_->pc->create_flow(transport::of(*qp_), rule);
}

Status QueuePair::destroy_flow(uint32_t handle) {
  auto g = stack_->lock();
  return stack_->pc->destroy_flow(transport::of(*qp_), handle);
}

size_t QueuePair::flows() const {
  auto g = stack_->lock();
  return stack_->pc->flows_of(transport::of(*qp_));
}

}  // namespace uroce

namespace uroce {

Result<std::unique_ptr<SharedReceiveQueue>> ProtectionDomain::create_wq(CompletionQueue& cq, uint32_t max_wr,
                                                                        uint32_t max_sge) {
  auto& stack = h_->stack;
  if (cq.h_->stack != stack) return make_error(EINVAL, "create_wq: the CQ must be of this device");
  auto g = stack->lock();
  auto q = wrap_srq(stack->pc->create_wq(h_->pd, cq.h_->cq, max_wr, max_sge), 0);
  if (q) (*q)->h_->cq = cq.h_;
  return q;
}

Status SharedReceiveQueue::set_state(WqState state) {
  auto g = h_->stack->lock();
  return h_->stack->pc->modify_wq(*h_->srq, state);
}

Result<std::unique_ptr<QueuePair>> ProtectionDomain::create_rss_qp(std::span<SharedReceiveQueue* const> table,
                                                                   const RxHash& hash) {
  auto& stack = h_->stack;
  std::vector<verbs::Srq*> wqs;
  for (SharedReceiveQueue* q : table) {
    if (!q || q->h_->stack != stack) return make_error(EINVAL, "create_rss_qp: each work queue must be of this device");
    wqs.push_back(q->h_->srq);
  }
  auto g = stack->lock();
  auto qp = stack->pc->create_rss_qp(h_->pd, std::move(wqs), hash);
  if (!qp) return qp.error();
  if (Status s = detail::hold_raw_port(*stack, *qp); !s) return s.error();
  std::unique_ptr<QueuePair> q(new QueuePair);
  q->stack_ = stack;
  q->pd_ = h_;
  q->send_cq_ = q->recv_cq_ = table[0]->h_->cq;
  for (SharedReceiveQueue* w : table) q->wqs_.push_back(w->h_);
  q->qp_ = *qp;
  return q;
}

}  // namespace uroce

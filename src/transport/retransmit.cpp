// The requester's timers as the completer runs them: the transport timer with retry_cnt (IBA
// 9.7.6.1.3), and recovery's probes before it, if it has any (selective repeat's tail-loss
// probe, with back-off). The RNR timer and the pacer's are the requester's own (requester.cpp).
#include "transport/recovery/recovery.hpp"
#include "transport/roles.hpp"

namespace uroce::transport {

using verbs::SendWqe;
using wire::Psn;

void start_retransmit_timer(Context& cx, Qp& qp, uint64_t now) {
  auto& c = qp.comp;
  const uint64_t full = transport_timeout_ns(qp.attr().timeout);
  if (!full) return;  // timeout 0: infinite, no timer at all
  c.retrans_armed_at = now;
  qp.timers.set(QpTimer::Retransmit, now + full);
  qp.timers.stop(QpTimer::Probe);
  if (uint64_t t = recovery::probe_interval(cx, qp); t && t < full) qp.timers.set(QpTimer::Probe, now + t);
  cx.arm_timer(qp, qp.timers.next());
}

void stop_retransmit_timer(Qp& qp) {
  qp.timers.stop(QpTimer::Retransmit);
  qp.timers.stop(QpTimer::Probe);
}

// The link still holds packets for the peer, and the peer took some within one timeout: ours
// may be among them, and none of those is lost (a stalled queue is not waited for).
static bool held_by_link(Context& cx, const Qp& qp, uint64_t now) {
  const CoreConfig& c = cx.config();
  if (!c.held_moved_at) return false;
  const uint64_t moved = c.held_moved_at(qp.flow.dst, qp.attr().dest_qp_num, now);
  return moved && now - std::min(now, moved) < transport_timeout_ns(qp.attr().timeout);
}

void completer_on_timer(Context& cx, Qp& qp, uint64_t now) {
  auto& c = qp.comp;
  const bool full_ran = qp.timers.expired(QpTimer::Retransmit, now);
  if (!full_ran && !qp.timers.expired(QpTimer::Probe, now)) return;
  stop_retransmit_timer(qp);
  if (c.una == qp.req.psn || qp.state() != QpState::Rts) return;
  if (held_by_link(cx, qp, now)) {
    start_retransmit_timer(cx, qp, now);
    return;
  }
  // Recovery's probe, after a short silence; probes repeat, further apart each time, while
  // the transport timer runs (a probe can be lost too).
  if (const uint64_t full = transport_timeout_ns(qp.attr().timeout); !full_ran) {
    recovery::probe(cx, qp);
    if (c.probes < 255) ++c.probes;
    qp.timers.set(QpTimer::Retransmit, c.retrans_armed_at + full);
    if (uint64_t t = recovery::probe_interval(cx, qp); t && now + t < c.retrans_armed_at + full)
      qp.timers.set(QpTimer::Probe, now + t);
    cx.arm_timer(qp, qp.timers.next());
    return;
  }
  if (c.fatal) {
    // The missing responses did not come and the responder is gone: the oldest WQE ends
    // with the error that ended the connection, not with a retry count nobody could meet.
    completer_fatal(cx, qp, c.fatal->status);
    return;
  }
  ++cx.ctr().retransmit_timeouts;
  ++qp.stats.retransmit_timeouts;
  if (c.retry_left == 0) {
    completer_fatal(cx, qp, WcStatus::RetryExcErr);
    return;
  }
  --c.retry_left;
  c.rewind = Rewind::None;  // a timeout allows a new gap retry
  SendWqe* w = completer_head(qp);
  Psn from = c.una;
  if (w && w->opcode == WrOpcode::RdmaRead) from = w->first_psn + w->resp_pkts;
  recovery::on_timeout(qp, from);
  requester_go_back(cx, qp, from);
  start_retransmit_timer(cx, qp, now);
}

}  // namespace uroce::transport

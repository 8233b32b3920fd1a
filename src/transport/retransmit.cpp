// The requester's timers as the completer runs them: the transport timer with retry_cnt (IBA
// 9.7.6.1.3), and under selective repeat the probes that come before it (a tail-loss probe
// with back-off). The RNR timer and the pacer's are the requester's own (requester.cpp).
#include <algorithm>

#include "transport/roles.hpp"

namespace uroce::transport {

using verbs::SendWqe;
using wire::Psn;

uint64_t retransmit_timeout(const Context& cx, const Qp& qp) {
  const uint64_t t = transport_timeout_ns(qp.attr().timeout);
  if (!qp.req.sr || !t) return t;
  // Three round trips once one is known (a lost resend in a stalled window waits for this),
  // within [sr_probe_min_ns, sr_probe_ns]; each probe since the last progress waits twice as
  // long as the one before (TCP's back-off), so a silent peer costs a few packets, not one
  // every few hundred microseconds until the QP's timeout.
  const auto& c = cx.config();
  const uint64_t srtt = qp.rtt.srtt_ns();
  const uint64_t probe = srtt ? std::clamp(3 * srtt, c.sr_probe_min_ns, c.sr_probe_ns) : c.sr_probe_ns;
  return std::min(t, probe << std::min<uint32_t>(qp.comp.probes, 24));
}

namespace {

// The PSN after the last READ the responder is known to have executed, READ w (the oldest,
// which answered) or the one of the last response placed: parts of those may be asked for
// again. A READ that never answered is asked for again whole, as first sent, since the
// responder may never have had it: a part would be taken for a new, shorter READ.
Psn answered_upto(Qp& qp, const SendWqe& w) {
  Psn upto = w.last_psn() + 1;
  if (!sr_reads_placed(qp)) return upto;
  auto& sq = qp.sq;
  const uint32_t prod = sq.prod.load(std::memory_order_acquire);
  for (uint32_t i = sq.done.load(std::memory_order_relaxed); i != prod && sq.slot(i).assigned; ++i) {
    const SendWqe& x = sq.slot(i);
    if (x.first_psn > qp.sr_read->seen) break;
    upto = x.last_psn() + 1;
  }
  return upto;
}

}  // namespace

void start_retransmit_timer(Context& cx, Qp& qp, uint64_t now) {
  auto& c = qp.comp;
  const uint64_t full = transport_timeout_ns(qp.attr().timeout);
  if (!full) return;  // timeout 0: infinite, no timer at all
  c.retrans_armed_at = now;
  qp.timers.set(QpTimer::Retransmit, now + full);
  qp.timers.stop(QpTimer::Probe);
  if (uint64_t t = retransmit_timeout(cx, qp); t < full) qp.timers.set(QpTimer::Probe, now + t);
  cx.arm_timer(qp, qp.timers.next());
}

void stop_retransmit_timer(Qp& qp) {
  qp.timers.stop(QpTimer::Retransmit);
  qp.timers.stop(QpTimer::Probe);
}

void completer_on_timer(Context& cx, Qp& qp, uint64_t now) {
  auto& c = qp.comp;
  const bool full_ran = qp.timers.expired(QpTimer::Retransmit, now);
  if (!full_ran && !qp.timers.expired(QpTimer::Probe, now)) return;
  stop_retransmit_timer(qp);
  if (c.una == qp.req.psn || qp.state() != QpState::Rts) return;
  // Selective repeat's probe, after a short silence. With PSNs reported held, the holes below
  // them were resent and lost again: all are resent once more. Otherwise the tail was lost, or
  // the answers to it: the newest packet goes again, and the answer to it reports any hole
  // before it. Probes repeat while the full timeout runs (a probe can be lost too).
  if (const uint64_t full = transport_timeout_ns(qp.attr().timeout); !full_ran) {
    ++cx.ctr().sr_probes;
    auto& s = qp.sr_send;
    SendWqe* w = completer_head(qp);
    if (w && !w->failed && w->opcode == WrOpcode::RdmaRead && qp.req.peer_sr && (w->resp_pkts || sr_reads_placed(qp))) {
      sr_reask_reads(cx, qp, w->first_psn + w->resp_pkts, answered_upto(qp, *w));  // responses were lost
    } else if (w && !w->failed && is_rd_atomic(w->opcode)) {  // it or its answer was lost: ask again
      const Psn from = w->first_psn + w->resp_pkts;
      c.rewind = Rewind::None;
      sr_mark(qp, from, false);
      requester_go_back(cx, qp, from);
      s.limit = from;
    } else if (sr_holds_any(qp)) {
      s.resent_upto = s.highest;
      requester_go_back(cx, qp, c.una);
      s.limit = s.highest;
    } else {
      requester_go_back(cx, qp, qp.req.high - 1);
    }
    if (c.probes < 255) ++c.probes;
    qp.timers.set(QpTimer::Retransmit, c.retrans_armed_at + full);
    if (uint64_t next = now + retransmit_timeout(cx, qp); next < c.retrans_armed_at + full)
      qp.timers.set(QpTimer::Probe, next);
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
  if (c.retry_left == 0) {
    completer_fatal(cx, qp, WcStatus::RetryExcErr);
    return;
  }
  --c.retry_left;
  c.rewind = Rewind::None;  // a timeout allows a new gap retry
  SendWqe* w = completer_head(qp);
  Psn from = c.una;
  if (w && w->opcode == WrOpcode::RdmaRead) from = w->first_psn + w->resp_pkts;
  if (qp.req.sr) {
    // Every hole goes again, and at least the oldest packet: the responder may hold all the
    // rest, and its answer to that one says where it stands.
    qp.sr_send.resent_upto = c.una - 1;
    sr_mark(qp, from, false);
  }
  requester_go_back(cx, qp, from);
  start_retransmit_timer(cx, qp, now);
}

}  // namespace uroce::transport

// Completer (IBA 9.7.5.1): consumes ACKs, NAKs, READ responses and atomic ACKs in PSN order,
// completes send WQEs in order, and drives retransmission: go-back-N on a PSN sequence NAK or a
// response gap, RNR back-off with rnr_retry (7 = forever); the transport timer is in
// retransmit.cpp.
//
// Read first, in the InfiniBand Architecture Specification, volume 1: 9.7.5.1 (how a requester
// takes ACKs, NAKs and responses: coalesced and implied ACKs, the implied NAK of a response
// gap), 9.7.6.1 (retries: the transport timer, retry_cnt, RNR NAKs and rnr_retry), 9.9.2 (what
// the requester does with each error), 10.7.3 (completions, in order).
//
// What the completer does with a response that is not plain progress, named at each site:
//   ghost      a PSN we never sent or already retired, a NAK in a READ response: dropped
//              silently, counted, never trusted (not even its implied ACK);
//   go back    a PSN sequence NAK or a response gap: resend from there (retry_cnt counts it
//              unless something was acknowledged); RNR NAK: the same after its timer;
//   remote     any other NAK (invalid request, remote access, remote operational): the WQE
//              completes with its status once every WQE before it has, the QP goes to ERR;
//   local      a response we cannot place (our own SGE no longer valid): local protection
//              error, the QP goes to ERR;
//   exhausted  retry_cnt or rnr_retry spent: retry exceeded, the QP goes to ERR.
#include <algorithm>
#include <cstring>

#include "transport/recovery/recovery.hpp"
#include "transport/roles.hpp"
#include "transport/sgl.hpp"

namespace uroce::transport {

using verbs::SendWqe;
using wire::AethType;
using wire::NakCode;
using wire::Opcode;
using wire::Psn;

SendWqe* completer_head(Qp& qp) {
  uint32_t d = qp.sq.done.load(std::memory_order_relaxed);
  if (d == qp.sq.prod.load(std::memory_order_acquire)) return nullptr;
  SendWqe& w = qp.sq.slot(d);
  return w.assigned || w.failed ? &w : nullptr;
}

void completer_fatal(Context& cx, Qp& qp, WcStatus st) {
  if (SendWqe* w = completer_head(qp)) cx.complete_send(qp, *w, st);
  cx.qp_to_error(qp);
}

namespace {

SendWqe* head(Qp& qp) { return completer_head(qp); }
void fatal(Context& cx, Qp& qp, WcStatus st) { completer_fatal(cx, qp, st); }

// Forward progress: restart the retry budgets and the transport timer (IBA 9.7.6.1.3).
void progressed(Context& cx, Qp& qp, uint64_t now) {
  auto& c = qp.comp;
  c.retry_left = qp.attr().retry_cnt;
  c.rnr_left = qp.attr().rnr_retry;
  c.rewind = Rewind::None;
  c.probes = 0;
  if (c.una == qp.req.psn) {
    stop_retransmit_timer(qp);
  } else {
    start_retransmit_timer(cx, qp, now);
  }
  cx.schedule(qp);
}

}  // namespace

// Retransmits from the first missing response (what recovery resends for it), once per gap
// until progress is made. Every response before `upto` has been sent.
void completer_gap_retry(Context& cx, Qp& qp, Psn from, Psn upto) {
  auto& c = qp.comp;
  if (c.rewind == Rewind::GapRetried) return;
  ++cx.ctr().retransmit_gaps;
  recovery::on_response_gap(cx, qp, from, upto);
  c.rewind = Rewind::GapRetried;
  c.rewound_to = from;
}

namespace {

void gap_retry(Context& cx, Qp& qp, Psn from, Psn upto) { completer_gap_retry(cx, qp, from, upto); }

// Completes SEND/WRITE WQEs whose last PSN is covered by an (explicit or implied) ACK of
// `acked`. Returns false if a READ/atomic stands in the way whose responses are missing
// although a later PSN is acknowledged: its responses were lost (IBA 9.7.5.1.5, implied NAK),
// and are asked for again if `retry`.
}  // namespace

bool completer_retire(Context& cx, Qp& qp, Psn acked, bool& progress, bool retry) {
  auto& c = qp.comp;
  while (SendWqe* w = head(qp)) {
    if (w->failed || !w->assigned) break;
    if (is_rd_atomic(w->opcode)) {
      Psn missing = w->first_psn + w->resp_pkts;
      if (acked >= missing) {
        if (retry) gap_retry(cx, qp, missing, acked + 1);
        return false;
      }
      break;
    }
    if (w->last_psn() <= acked) {
      c.una = w->last_psn() + 1;
      progress = true;
      cx.complete_send(qp, *w, WcStatus::Success);
      continue;
    }
    if (acked >= c.una) {  // a coalesced ACK inside a multi-packet message
      c.una = acked + 1;
      progress = true;
    }
    break;
  }
  completer_retire_failed(cx, qp);
  return true;
}

namespace {

bool retire_acked(Context& cx, Qp& qp, Psn acked, bool& progress, bool retry = true) {
  return completer_retire(cx, qp, acked, progress, retry);
}

WcStatus nak_status(NakCode code) {
  switch (code) {
    case NakCode::InvalidRequest:
    case NakCode::InvalidRdRequest: return WcStatus::RemInvReqErr;
    case NakCode::RemoteAccessError: return WcStatus::RemAccessErr;
    case NakCode::RemoteOperationalError: return WcStatus::RemOpErr;
    case NakCode::PsnSequenceError: break;
  }
  return WcStatus::RemOpErr;
}

}  // namespace

// Whether a READ response fits at position k of READ w: a full MTU but at the end. Its
// opcode says where in a response stream it stands, unless recovery asked again for a run of
// the READ's responses (a stream may then start anywhere).
bool read_response_fits(const Qp& qp, const SendWqe& w, uint32_t k, const wire::Packet& p) {
  const uint32_t mtu = qp.mtu();
  const bool last = k + 1 == w.npkts;
  const Opcode op = p.bth.opcode;
  const bool pos_ok = last ? (op == Opcode::RC_READ_RESPONSE_LAST || op == Opcode::RC_READ_RESPONSE_ONLY)
                           : (recovery::any_read_position(qp) || op == Opcode::RC_READ_RESPONSE_FIRST ||
                              op == Opcode::RC_READ_RESPONSE_MIDDLE);
  return pos_ok && p.payload.size() == (last ? w.length - k * mtu : mtu);
}

namespace {

bool response_fits(const Qp& qp, const SendWqe& w, uint32_t k, const wire::Packet& p) {
  return read_response_fits(qp, w, k, p);
}

// FLUSH and ATOMIC WRITE are answered by a READ RESPONSE ONLY without payload (IBA 1.5).
Verdict on_empty_reply(Context& cx, Qp& qp, SendWqe& w, const wire::Packet& p, bool& progress) {
  if (p.bth.opcode != Opcode::RC_READ_RESPONSE_ONLY || !p.payload.empty()) {
    ++cx.ctr().rx_malformed;  // ghost: not the answer this request expects
    return Verdict::Unexpected;
  }
  ++w.resp_pkts;
  qp.comp.una = p.bth.psn + 1;
  progress = true;
  cx.complete_send(qp, w, WcStatus::Success);
  return Verdict::Acked;
}

Verdict on_read_response(Context& cx, Qp& qp, const wire::Packet& p, bool& progress) {
  Psn psn = p.bth.psn;
  // Responses past a gap are placed by recovery, or, as IBA has it, the gap is asked for again.
  if (!retire_acked(cx, qp, psn - 1, progress, !recovery::places_reads(qp))) {
    if (!recovery::places_reads(qp)) return Verdict::GapRetry;
    return recovery::place_read_response(cx, qp, p);
  }
  SendWqe* w = head(qp);
  if (w && !w->failed && traits(w->opcode).empty_reply && psn == w->first_psn) return on_empty_reply(cx, qp, *w, p, progress);
  if (!w || w->failed || w->opcode != WrOpcode::RdmaRead || psn < w->first_psn || psn > w->last_psn()) {
    ++cx.ctr().rx_duplicate;  // ghost
    return Verdict::Stale;
  }
  Psn expect = w->first_psn + w->resp_pkts;
  if (psn != expect) {
    if (psn < expect) return recovery::on_passed_response(cx, qp, *w, p);
    ++cx.ctr().rx_out_of_sequence;
    gap_retry(cx, qp, expect, psn);  // go back: the responses before it were lost
    return Verdict::GapRetry;
  }
  // A retried READ restarts its response stream with FIRST (or ONLY) at the PSN it asked for.
  const uint32_t k = w->resp_pkts;
  if (!response_fits(qp, *w, k, p)) {
    ++cx.ctr().rx_malformed;  // ghost: not the response this READ expects here
    return Verdict::Unexpected;
  }
  auto& sq = qp.sq;
  uint32_t idx = sq.done.load(std::memory_order_relaxed);
  if (sgl_scatter(cx.mrs(), qp.pd(), sq.sges(idx), w->num_sge, uint64_t(k) * qp.mtu(), p.payload.data(),
                  uint32_t(p.payload.size())) != verbs::KeyCheck::Ok) {
    fatal(cx, qp, WcStatus::LocProtErr);  // local
    return Verdict::Fatal;
  }
  ++w->resp_pkts;
  qp.comp.una = psn + 1;
  progress = true;
  if (w->resp_pkts == w->npkts) cx.complete_send(qp, *w, WcStatus::Success);
  recovery::on_response_taken(qp, psn);
  return Verdict::Acked;
}

Verdict on_atomic_ack(Context& cx, Qp& qp, const wire::Packet& p, bool& progress) {
  Psn psn = p.bth.psn;
  if (!retire_acked(cx, qp, psn - 1, progress)) return Verdict::GapRetry;
  SendWqe* w = head(qp);
  if (!w || w->failed || !traits(w->opcode).atomic || psn != w->first_psn) {  // FLUSH, ATOMIC WRITE: no atomic ACK
    ++cx.ctr().rx_duplicate;  // ghost
    return Verdict::Stale;
  }
  uint8_t orig[8];
  std::memcpy(orig, &p.atomic_orig, 8);  // delivered in host order, as rdma-core's providers do
  auto& sq = qp.sq;
  uint32_t idx = sq.done.load(std::memory_order_relaxed);
  if (sgl_scatter(cx.mrs(), qp.pd(), sq.sges(idx), w->num_sge, 0, orig, 8) != verbs::KeyCheck::Ok) {
    fatal(cx, qp, WcStatus::LocProtErr);  // local
    return Verdict::Fatal;
  }
  qp.comp.una = psn + 1;
  progress = true;
  cx.complete_send(qp, *w, WcStatus::Success);
  return Verdict::Acked;
}

// An RNR NAK: what it acknowledges is retired, then the requester waits out the timer it
// names and resends from its PSN (rnr_retry 7: forever).
Verdict on_rnr_nak(Context& cx, Qp& qp, const wire::Packet& p, uint64_t now, bool& progress) {
  auto& c = qp.comp;
  const Psn psn = p.bth.psn;
  ++cx.ctr().rx_rnr_naks;
  ++qp.stats.rx_rnr_naks;
  if (!retire_acked(cx, qp, psn - 1, progress)) return Verdict::GapRetry;
  if (qp.attr().rnr_retry != 7) {
    if (c.rnr_left == 0) {
      fatal(cx, qp, WcStatus::RnrRetryExcErr);  // exhausted
      return Verdict::Fatal;
    }
    --c.rnr_left;
  }
  qp.timers.set(QpTimer::Rnr, now + wire::rnr_timer_ns(p.aeth.value()));
  cx.arm_timer(qp, qp.timers.get(QpTimer::Rnr));
  recovery::on_rewind(qp, psn);
  requester_go_back(cx, qp, psn);
  stop_retransmit_timer(qp);  // the RNR timer, not the transport timer, runs now
  if (progress) {
    c.retry_left = qp.attr().retry_cnt;
    c.rewind = Rewind::Rewound;  // a new gap may be retried again
  }
  return Verdict::RnrWait;
}

// A NAK: a PSN sequence error goes back to its PSN (retry_cnt counts it unless something was
// acknowledged); any other ends the QP with its status, once what comes before it completed.
Verdict on_nak(Context& cx, Qp& qp, const wire::Packet& p, bool& progress) {
  auto& c = qp.comp;
  const Psn psn = p.bth.psn;
  auto code = NakCode(p.aeth.value());
  bool seq = code == NakCode::PsnSequenceError;
  ++qp.stats.rx_naks;
  if (!retire_acked(cx, qp, psn - 1, progress, seq)) {
    if (seq) return Verdict::GapRetry;
    if (!c.fatal) c.fatal = PendingFatal{psn, nak_status(code)};  // remote, once what precedes it completed
    return Verdict::FatalPending;
  }
  if (!seq) {
    fatal(cx, qp, nak_status(code));  // remote
    return Verdict::Fatal;
  }
  ++cx.ctr().rx_naks_seq;
  // The requester already went back to this PSN (an RNR NAK or an earlier NAK for the same
  // gap): this NAK reports the packets that were in flight behind it, nothing new.
  if (!progress && (qp.timers.armed(QpTimer::Rnr) || (c.rewind != Rewind::None && c.rewound_to == psn))) return Verdict::Stale;
  if (!progress) {
    if (c.retry_left == 0) {
      fatal(cx, qp, WcStatus::RetryExcErr);  // exhausted
      return Verdict::Fatal;
    }
    --c.retry_left;
  }
  recovery::on_rewind(qp, psn);
  requester_go_back(cx, qp, psn);
  return Verdict::GoBack;
}

}  // namespace

void completer_retire_failed(Context& cx, Qp& qp) {
  uint32_t d = qp.sq.done.load(std::memory_order_relaxed);
  if (d == qp.sq.prod.load(std::memory_order_acquire)) return;
  SendWqe& w = qp.sq.slot(d);
  if (!w.failed) return;
  cx.complete_send(qp, w, w.error);
  cx.qp_to_error(qp);
}

namespace {

// The checks and effects of one response; completer_on_response traces the verdict.
Verdict on_response(Context& cx, Qp& qp, const wire::Packet& p, uint64_t now) {
  Psn psn = p.bth.psn;
  auto& c = qp.comp;
  // Only PSNs in [una - window, next unsent) can answer anything of ours.
  if (psn >= qp.req.psn) {
    ++cx.ctr().rx_out_of_sequence;  // ghost: we never sent that PSN
    return Verdict::Unexpected;
  }
  // READ responses and atomic ACKs carry an ACK syndrome; NAKs travel only in ACKNOWLEDGE
  // packets (IBA 9.7.5.1.5). Anything else is not trusted, not even its implied ACK.
  if (p.bth.opcode != Opcode::RC_ACKNOWLEDGE && p.has(wire::kAeth) && p.aeth.type() != AethType::Ack) {
    ++cx.ctr().rx_malformed;  // ghost
    return Verdict::Unexpected;
  }
  bool progress = false;
  Verdict v = Verdict::Unexpected;
  if (p.bth.opcode == Opcode::RC_ACKNOWLEDGE) {
    if (psn < c.una - 1) {
      ++cx.ctr().rx_duplicate;  // ghost: acknowledges what is retired
      return Verdict::Stale;
    }
    switch (p.aeth.type()) {
      case AethType::Ack:
        recovery::on_plain_ack(qp);
        v = !retire_acked(cx, qp, psn, progress) ? Verdict::GapRetry : progress ? Verdict::Acked : Verdict::Stale;
        break;
      case AethType::RnrNak:
        v = on_rnr_nak(cx, qp, p, now, progress);
        if (v != Verdict::GapRetry) return v;  // the RNR timer, not the transport timer, runs now
        break;
      case AethType::Nak:
        v = on_nak(cx, qp, p, progress);
        break;
      default:
        ++cx.ctr().rx_malformed;  // ghost: a reserved AETH type
        return Verdict::Unexpected;
    }
  } else if (p.bth.opcode == Opcode::UROCE_SACK) {
    if (psn < c.una - 1) {
      ++cx.ctr().rx_duplicate;  // ghost: acknowledges what is retired
      return Verdict::Stale;
    }
    v = recovery::on_sack(cx, qp, p, progress);
  } else if (p.info().flags & wire::kReadResponse) {
    v = on_read_response(cx, qp, p, progress);
  } else if (p.bth.opcode == Opcode::RC_ATOMIC_ACKNOWLEDGE) {
    v = on_atomic_ack(cx, qp, p, progress);
  }
  if (qp.state() == QpState::Err) return Verdict::Fatal;
  recovery::after_answer(cx, qp, progress);
  if (c.fatal && progress && retire_acked(cx, qp, c.fatal->psn - 1, progress, false)) {
    fatal(cx, qp, c.fatal->status);  // everything before the NAKed request has completed
    return Verdict::Fatal;
  }
  if (progress) progressed(cx, qp, now);
  return v;
}

}  // namespace

Verdict completer_on_response(Context& cx, Qp& qp, const wire::Packet& p, uint64_t now) {
  const Psn una = qp.comp.una;
  Verdict v = on_response(cx, qp, p, now);
  if (qp.comp.una != una) {
    recovery::on_una_moved(qp, p, una);
    if (auto rtt = qp.rtt.on_ack(qp.comp.una, now); rtt && qp.rate) qp.rate->on_rtt(*rtt, now);
  }
  cx.trace(qp, p, v);
  return v;
}

}  // namespace uroce::transport

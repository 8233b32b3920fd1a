// Completer (IBA 9.7.5.1): consumes ACKs, NAKs, READ responses and atomic ACKs in PSN order,
// completes send WQEs in order, and drives retransmission: go-back-N on a PSN sequence NAK or a
// response gap, RNR back-off with rnr_retry (7 = forever); the transport timer is in
// retransmit.cpp.
#include <algorithm>
#include <cstring>

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
bool placed(const Qp& qp) { return sr_reads_placed(qp); }

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

// Retransmits from the first missing response, once per gap until progress is made. Every
// response before `upto` has been sent: under selective repeat a READ asks again only for
// those of its responses that did not arrive.
void gap_retry(Context& cx, Qp& qp, Psn from, Psn upto) {
  auto& c = qp.comp;
  if (c.rewind == Rewind::GapRetried) return;
  ++cx.ctr().retransmit_gaps;
  if (qp.req.peer_sr && head(qp)->opcode == WrOpcode::RdmaRead) {
    sr_reask_reads(cx, qp, from, upto);
    c.rewind = Rewind::GapRetried;
    c.rewound_to = from;
    return;
  }
  requester_go_back(cx, qp, from);
  // Under selective repeat the requests after it arrived (or are reported missing on their
  // own): only the READ is asked for again, not every later request and its responses.
  if (qp.req.sr) qp.sr_send.limit = from;
  sr_mark(qp, from, false);
  c.rewind = Rewind::GapRetried;
  c.rewound_to = from;
}

// Completes SEND/WRITE WQEs whose last PSN is covered by an (explicit or implied) ACK of
// `acked`. Returns false if a READ/atomic stands in the way whose responses are missing
// although a later PSN is acknowledged: its responses were lost (IBA 9.7.5.1.5, implied NAK),
// and are asked for again if `retry`.
bool retire_acked(Context& cx, Qp& qp, Psn acked, bool& progress, bool retry = true) {
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

// Whether a READ response fits at position k of READ w: a full MTU but at the end. Its
// opcode says where in a response stream it stands; under selective repeat a stream can be
// the answer to a re-ask of any run of the READ's responses (sr_reask_reads).
bool response_fits(const Qp& qp, const SendWqe& w, uint32_t k, const wire::Packet& p) {
  const uint32_t mtu = qp.mtu();
  const bool last = k + 1 == w.npkts;
  const Opcode op = p.bth.opcode;
  const bool pos_ok = last ? (op == Opcode::RC_READ_RESPONSE_LAST || op == Opcode::RC_READ_RESPONSE_ONLY)
                           : (qp.req.peer_sr || op == Opcode::RC_READ_RESPONSE_FIRST || op == Opcode::RC_READ_RESPONSE_MIDDLE);
  return pos_ok && p.payload.size() == (last ? w.length - k * mtu : mtu);
}

// Selective repeat: responses placed past a gap complete what they can once the gap is filled,
// in order; a SEND or WRITE between READs was executed if a later READ's response arrived.
void advance_placed(Context& cx, Qp& qp, bool& progress) {
  while (qp.sr_read && qp.sr_read->count) {
    SendWqe* w = head(qp);
    if (!w || w->failed) return;
    if (w->opcode != WrOpcode::RdmaRead) {
      if (is_rd_atomic(w->opcode) || !(w->last_psn() < qp.sr_read->seen)) return;
      qp.comp.una = w->last_psn() + 1;
      cx.complete_send(qp, *w, WcStatus::Success);
      progress = true;
      continue;
    }
    const Psn e = w->first_psn + w->resp_pkts;
    if (!sr_read_take(qp, e)) return;
    ++w->resp_pkts;
    qp.comp.una = e + 1;
    progress = true;
    if (w->resp_pkts == w->npkts) cx.complete_send(qp, *w, WcStatus::Success);
  }
}

// Selective repeat: a READ response past the first one missing is written into its READ's
// buffer at once. The responses between the last one placed and it were lost (responses
// arrive in order): those alone are asked for again.
Verdict place_past_gap(Context& cx, Qp& qp, const wire::Packet& p) {
  const Psn psn = p.bth.psn;
  SendWqe* h = head(qp);
  const Psn missing = h->first_psn + h->resp_pkts;
  auto& sq = qp.sq;
  const uint32_t prod = sq.prod.load(std::memory_order_acquire);
  uint32_t idx = sq.done.load(std::memory_order_relaxed);
  for (; idx != prod && sq.slot(idx).assigned && sq.slot(idx).last_psn() < psn; ++idx) {
  }
  SendWqe* w = idx != prod && sq.slot(idx).assigned ? &sq.slot(idx) : nullptr;
  if (!w || w->failed || w->opcode != WrOpcode::RdmaRead || psn < w->first_psn ||
      Psn::distance(missing, psn) >= SrReadMap::kSpan) {
    ++cx.ctr().rx_out_of_sequence;
    gap_retry(cx, qp, missing, psn);
    return Verdict::GapRetry;
  }
  const uint32_t k = Psn::distance(w->first_psn, psn);
  if (!response_fits(qp, *w, k, p)) {
    ++cx.ctr().rx_malformed;
    return Verdict::Unexpected;
  }
  if (sr_read_got(qp, psn)) {
    // Each response comes once unless asked for again: a second, different one for a PSN already
    // placed means one of them is a stranger's. Neither is believed; the PSN is asked for again.
    if (sgl_equal(cx.mrs(), qp.pd(), sq.sges(idx), w->num_sge, uint64_t(k) * qp.mtu(), p.payload.data(),
                  uint32_t(p.payload.size()))) {
      ++cx.ctr().rx_duplicate;
      return Verdict::Stale;
    }
    sr_read_take(qp, psn);
    ++cx.ctr().rx_sr_conflicts;
    sr_reask_reads(cx, qp, psn, psn + 1);
    return Verdict::Conflict;
  }
  if (sgl_scatter(cx.mrs(), qp.pd(), sq.sges(idx), w->num_sge, uint64_t(k) * qp.mtu(), p.payload.data(),
                  uint32_t(p.payload.size())) != verbs::KeyCheck::Ok) {
    fatal(cx, qp, WcStatus::LocProtErr);
    return Verdict::Fatal;
  }
  const bool first = !qp.sr_read || !qp.sr_read->count;
  const Psn from = first || qp.sr_read->seen < missing ? missing : qp.sr_read->seen + 1;
  sr_read_set(qp, psn);
  ++cx.ctr().rx_sr_read_placed;
  if (from < psn) {
    if (h->opcode != WrOpcode::RdmaRead && from == missing) gap_retry(cx, qp, missing, psn);  // an atomic's answer
    sr_reask_reads(cx, qp, from, psn);
    // An ACK past the gap that was sent before the re-ask arrived says nothing new.
    qp.comp.rewind = Rewind::GapRetried;
    qp.comp.rewound_to = missing;
  }
  return Verdict::Held;
}

// A response for a PSN of the READ at the head that was already taken. Each comes once unless
// asked for again, and under selective repeat one may have been taken past a gap before its
// own arrived: a different one now means one of them is a stranger's. Neither is believed: the
// READ asks again for everything from that PSN on.
Verdict on_passed_response(Context& cx, Qp& qp, SendWqe& w, const wire::Packet& p) {
  const Psn psn = p.bth.psn;
  const uint32_t k = Psn::distance(w.first_psn, psn);
  if (!qp.req.peer_sr || !response_fits(qp, w, k, p) ||
      sgl_equal(cx.mrs(), qp.pd(), qp.sq.sges(qp.sq.done.load(std::memory_order_relaxed)), w.num_sge,
                uint64_t(k) * qp.mtu(), p.payload.data(), uint32_t(p.payload.size()))) {
    ++cx.ctr().rx_duplicate;
    return Verdict::Stale;
  }
  ++cx.ctr().rx_sr_conflicts;
  w.resp_pkts = k;
  qp.comp.una = psn;
  requester_go_back(cx, qp, psn);
  qp.comp.rewind = Rewind::GapRetried;
  qp.comp.rewound_to = psn;
  return Verdict::Conflict;
}

Verdict on_read_response(Context& cx, Qp& qp, const wire::Packet& p, bool& progress) {
  Psn psn = p.bth.psn;
  if (!retire_acked(cx, qp, psn - 1, progress, !qp.req.peer_sr)) {
    if (!qp.req.peer_sr) return Verdict::GapRetry;
    return place_past_gap(cx, qp, p);
  }
  SendWqe* w = head(qp);
  if (!w || w->failed || w->opcode != WrOpcode::RdmaRead || psn < w->first_psn || psn > w->last_psn()) {
    ++cx.ctr().rx_duplicate;
    return Verdict::Stale;
  }
  Psn expect = w->first_psn + w->resp_pkts;
  if (psn != expect) {
    if (psn < expect) return on_passed_response(cx, qp, *w, p);
    ++cx.ctr().rx_out_of_sequence;
    gap_retry(cx, qp, expect, psn);
    return Verdict::GapRetry;
  }
  // A retried READ restarts its response stream with FIRST (or ONLY) at the PSN it asked for.
  const uint32_t k = w->resp_pkts;
  if (!response_fits(qp, *w, k, p)) {
    ++cx.ctr().rx_malformed;
    return Verdict::Unexpected;
  }
  auto& sq = qp.sq;
  uint32_t idx = sq.done.load(std::memory_order_relaxed);
  if (sgl_scatter(cx.mrs(), qp.pd(), sq.sges(idx), w->num_sge, uint64_t(k) * qp.mtu(), p.payload.data(),
                  uint32_t(p.payload.size())) != verbs::KeyCheck::Ok) {
    fatal(cx, qp, WcStatus::LocProtErr);
    return Verdict::Fatal;
  }
  ++w->resp_pkts;
  qp.comp.una = psn + 1;
  progress = true;
  if (w->resp_pkts == w->npkts) cx.complete_send(qp, *w, WcStatus::Success);
  sr_read_take(qp, psn);  // placed before, and answered again
  return Verdict::Acked;
}

Verdict on_atomic_ack(Context& cx, Qp& qp, const wire::Packet& p, bool& progress) {
  Psn psn = p.bth.psn;
  if (!retire_acked(cx, qp, psn - 1, progress)) return Verdict::GapRetry;
  SendWqe* w = head(qp);
  if (!w || w->failed || !is_rd_atomic(w->opcode) || w->opcode == WrOpcode::RdmaRead || psn != w->first_psn) {
    ++cx.ctr().rx_duplicate;
    return Verdict::Stale;
  }
  uint8_t orig[8];
  std::memcpy(orig, &p.atomic_orig, 8);  // delivered in host order, as rdma-core's providers do
  auto& sq = qp.sq;
  uint32_t idx = sq.done.load(std::memory_order_relaxed);
  if (sgl_scatter(cx.mrs(), qp.pd(), sq.sges(idx), w->num_sge, 0, orig, 8) != verbs::KeyCheck::Ok) {
    fatal(cx, qp, WcStatus::LocProtErr);
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
  if (!retire_acked(cx, qp, psn - 1, progress)) return Verdict::GapRetry;
  if (qp.attr().rnr_retry != 7) {
    if (c.rnr_left == 0) {
      fatal(cx, qp, WcStatus::RnrRetryExcErr);
      return Verdict::Fatal;
    }
    --c.rnr_left;
  }
  qp.timers.set(QpTimer::Rnr, now + wire::rnr_timer_ns(p.aeth.value()));
  cx.arm_timer(qp, qp.timers.get(QpTimer::Rnr));
  sr_mark(qp, psn, false);  // the responder wants this one, whatever an older SACK said
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
  if (!retire_acked(cx, qp, psn - 1, progress, seq)) {
    if (seq) return Verdict::GapRetry;
    if (!c.fatal) c.fatal = PendingFatal{psn, nak_status(code)};
    return Verdict::FatalPending;
  }
  if (!seq) {
    fatal(cx, qp, nak_status(code));
    return Verdict::Fatal;
  }
  ++cx.ctr().rx_naks_seq;
  // The requester already went back to this PSN (an RNR NAK or an earlier NAK for the same
  // gap): this NAK reports the packets that were in flight behind it, nothing new.
  if (!progress && (qp.timers.armed(QpTimer::Rnr) || (c.rewind != Rewind::None && c.rewound_to == psn))) return Verdict::Stale;
  if (!progress) {
    if (c.retry_left == 0) {
      fatal(cx, qp, WcStatus::RetryExcErr);
      return Verdict::Fatal;
    }
    --c.retry_left;
  }
  sr_mark(qp, psn, false);
  requester_go_back(cx, qp, psn);
  return Verdict::GoBack;
}

// Where the requester's next packet stands: inside a resend if below Requester::high.
Psn next_psn(Qp& qp) {
  auto& sq = qp.sq;
  if (qp.req.next == sq.prod.load(std::memory_order_acquire)) return qp.req.high;
  const SendWqe& w = sq.slot(qp.req.next);
  return w.assigned ? w.first_psn + qp.req.pkt : qp.req.high;
}

// Resends of the last round went out before any PSN from round_high on. Once `highest` (held)
// is one of those, a resent hole still missing was lost again (the link keeps order): the
// holes may all go again.
void note_lost_resends(Context& cx, Qp& qp, Psn highest) {
  auto& s = qp.sr_send;
  const Psn una = qp.comp.una;
  if (!s.round || Psn::distance(una, s.round_high) > Psn::distance(una, highest)) return;
  s.round = false;
  Psn h = una;
  while (h < highest && sr_sacked(qp, h)) h += 1;
  if (h < highest && Psn::distance(una, h) <= Psn::distance(una, s.resent_upto)) {
    s.resent_upto = una - 1;
    ++cx.ctr().sr_lost_resends;
  }
}

// A selective ACK: an ACK of its PSN, and which later PSNs the responder holds. Holes below
// the highest held PSN are resent, each once per round (a round's resend seen lost, or a
// probe, starts another); held PSNs are skipped by every resend.
Verdict on_sack(Context& cx, Qp& qp, const wire::Packet& p, bool& progress) {
  auto& c = qp.comp;
  auto& s = qp.sr_send;
  // Only from a peer that takes part: agreed, or shown by the first answer (which may be
  // this SACK, marked as its answers are). We never announced it, or the peer does not take
  // part: not an answer of ours.
  // Before that is settled, only a SACK that acknowledges something is an answer at all.
  if (!qp.req.sr || (!qp.req.peer_sr && (qp.req.peer_settled || !p.bth.sr || p.bth.psn < c.una))) {
    ++cx.ctr().rx_bad_opcode;
    return Verdict::Unexpected;
  }
  if (p.payload.size() != wire::kSackLen) {
    ++cx.ctr().rx_malformed;
    return Verdict::Unexpected;
  }
  ++cx.ctr().rx_sacks;
  const Psn acked = p.bth.psn;
  if (!retire_acked(cx, qp, acked, progress)) {
    // A READ's responses are missing (asked for again by its own PSN), yet every request up
    // to `acked` reached the responder: resends skip them.
    const SendWqe* w = head(qp);
    const Psn missing = w->first_psn + w->resp_pkts;
    for (Psn q = c.una; q <= acked && Psn::distance(c.una, q) < wire::kSackPsns; q += 1)
      if (q != missing) sr_mark(qp, q, true);
  }
  // The bitmap is what the responder holds now: a PSN it no longer reports (a copy it dropped
  // when a stranger's request conflicted with it) is a hole again. The PSN after `acked` is the
  // one it waits for, whatever an older SACK said: held there, it runs only after a resend.
  const Psn next = acked + 1;
  const bool wanted = c.una <= next && next < qp.req.high && sr_sacked(qp, next);
  if (wanted) sr_mark(qp, next, false);
  bool any = false;
  Psn highest;
  for (uint32_t i = 1; i < wire::kSackPsns; ++i) {
    const Psn q = acked + 1 + i;
    if (q >= qp.req.high) break;  // never sent: nothing of ours
    if (q < c.una) continue;
    const bool held = (p.payload[i / 8] >> (i % 8)) & 1;
    sr_mark(qp, q, held);
    if (!held) continue;
    highest = q;
    any = true;
  }
  const Verdict plain = c.una <= acked ? Verdict::GapRetry : progress ? Verdict::Acked : Verdict::Stale;
  if (wanted) s.resent_upto = next - 1;  // resent once already, as held: once more
  if (!any && wanted) {
    requester_go_back(cx, qp, next);
    s.limit = next;
    ++cx.ctr().retransmit_gaps;
    return Verdict::Resend;
  }
  if (!any) return plain;
  if (!sr_holds_any(qp) || s.highest < highest) s.highest = highest;
  note_lost_resends(cx, qp, highest);
  Psn from = c.una;  // or past the holes already resent, if that is still ahead
  if (Psn::distance(c.una, s.resent_upto + 1) <= Psn::distance(c.una, qp.req.high)) from = s.resent_upto + 1;
  while (from < highest && sr_sacked(qp, from)) from += 1;
  if (!(from < highest)) return plain;
  s.resent_upto = highest;
  const Psn at = next_psn(qp);
  if (!(at < qp.req.high) || from < at) requester_go_back(cx, qp, from);
  s.limit = highest;
  s.round = true;
  s.round_high = qp.req.high;
  ++cx.ctr().retransmit_gaps;
  return Verdict::Resend;
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
    ++cx.ctr().rx_out_of_sequence;
    return Verdict::Unexpected;
  }
  // READ responses and atomic ACKs carry an ACK syndrome; NAKs travel only in ACKNOWLEDGE
  // packets (IBA 9.7.5.1.5). Anything else is not trusted, not even its implied ACK.
  if (p.bth.opcode != Opcode::RC_ACKNOWLEDGE && p.has(wire::kAeth) && p.aeth.type() != AethType::Ack) {
    ++cx.ctr().rx_malformed;
    return Verdict::Unexpected;
  }
  bool progress = false;
  Verdict v = Verdict::Unexpected;
  if (p.bth.opcode == Opcode::RC_ACKNOWLEDGE) {
    if (psn < c.una - 1) {
      ++cx.ctr().rx_duplicate;
      return Verdict::Stale;
    }
    switch (p.aeth.type()) {
      case AethType::Ack:
        // A responder that takes part sends a plain ACK only while it holds nothing.
        if (qp.req.peer_sr) qp.sr_send.sacked = {};
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
        ++cx.ctr().rx_malformed;
        return Verdict::Unexpected;
    }
  } else if (p.bth.opcode == Opcode::UROCE_SACK) {
    if (psn < c.una - 1) {
      ++cx.ctr().rx_duplicate;
      return Verdict::Stale;
    }
    v = on_sack(cx, qp, p, progress);
  } else if (p.info().flags & wire::kReadResponse) {
    v = on_read_response(cx, qp, p, progress);
  } else if (p.bth.opcode == Opcode::RC_ATOMIC_ACKNOWLEDGE) {
    v = on_atomic_ack(cx, qp, p, progress);
  }
  if (qp.state() == QpState::Err) return Verdict::Fatal;
  if (placed(qp)) advance_placed(cx, qp, progress);  // the ACK or answer ahead of them came
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
    if (!qp.req.peer_settled) {  // the first answer that acknowledged a request: marked, or not
      qp.req.peer_sr = p.bth.sr;
      qp.req.peer_settled = true;
    }
    if (qp.req.sr) sr_forget(qp, una, qp.comp.una);
    if (auto rtt = qp.rtt.on_ack(qp.comp.una, now); rtt && qp.rate) qp.rate->on_rtt(*rtt, now);
  }
  cx.trace(qp, p, v);
  return v;
}

}  // namespace uroce::transport

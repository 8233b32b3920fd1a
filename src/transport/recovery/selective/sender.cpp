// Selective repeat, the requester's side (after IRN): which PSNs the responder said it holds,
// resending only the holes below the highest of them (again when a resend is seen lost), a
// window that counts only what is in the network (BDP-FC), later WRITEs marked placeable, and
// a probe with back-off for the tail of a burst, where nothing comes after a loss to report it.
#include <algorithm>
#include <bit>

#include "transport/recovery/selective/selective.hpp"
#include "transport/roles.hpp"

namespace uroce::transport {

using verbs::SendWqe;
using wire::kSackPsns;
using wire::Psn;

namespace {

uint32_t slot_of(Psn psn) { return psn.value() % kSackPsns; }

}  // namespace

bool sr_sacked(const Qp& qp, Psn psn) {
  const uint32_t k = slot_of(psn);
  return (qp.sr_send.sacked[k / 64] >> (k % 64)) & 1;
}

void sr_mark(Qp& qp, Psn psn, bool held) {
  const uint32_t k = slot_of(psn);
  uint64_t& word = qp.sr_send.sacked[k / 64];
  word = held ? word | (uint64_t(1) << (k % 64)) : word & ~(uint64_t(1) << (k % 64));
}

uint32_t sr_sacked_count(const Qp& qp) {
  uint32_t n = 0;
  for (uint64_t w : qp.sr_send.sacked) n += uint32_t(std::popcount(w));
  return n;
}

bool sr_holds_any(const Qp& qp) {
  const Psn h = qp.sr_send.highest;
  return Psn::distance(qp.comp.una, h) < Psn::distance(qp.comp.una, qp.req.high) && sr_sacked(qp, h);
}

void sr_forget(Qp& qp, Psn from, Psn to) {
  const uint32_t n = std::min(Psn::distance(from, to), kSackPsns);
  for (uint32_t i = 0; i < n; ++i) sr_mark(qp, from + i, false);
}


// Selective repeat: a WRITE whose bytes no earlier request still unfinished can touch (every
// one of them a WRITE elsewhere) may be placed past a hole before those execute. A READ, an
// atomic or a SEND before it reads or writes memory this side cannot see; so they, or more
// than 64 to compare, keep it in order.
bool sr_placeable(Qp& qp, const SendWqe& w) {
  if (!traits(w.opcode).write || w.npkts <= 1) return false;
  auto& sq = qp.sq;
  const uint32_t from = sq.done.load(std::memory_order_relaxed), n = qp.req.next - from;
  const uint64_t end = w.remote_addr + w.length;
  if (n > 64 || end < w.remote_addr) return false;
  for (uint32_t i = from; i != qp.req.next; ++i) {
    const SendWqe& e = sq.slot(i);
    const uint64_t e_end = e.remote_addr + e.length;
    if (!traits(e.opcode).write || e_end < e.remote_addr) return false;
    if (e.remote_addr < end && w.remote_addr < e_end) return false;
  }
  return true;
}


// Whether `psn` may go out under `window`: packets from una on, less (selective repeat) those
// the responder reported held, which left the network (IRN's BDP-FC); selective repeat never
// goes past what the responder can hold.
bool sr_window_full(const Qp& qp, Psn psn, uint32_t window) {
  const uint32_t out = Psn::distance(qp.comp.una, psn);
  return out >= wire::kSackPsns || out - std::min(out, sr_sacked_count(qp)) >= window;
}


namespace {

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
}  // namespace

Verdict sr_on_sack(Context& cx, Qp& qp, const wire::Packet& p, bool& progress) {
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
  if (!completer_retire(cx, qp, acked, progress)) {
    // A READ's responses are missing (asked for again by its own PSN), yet every request up
    // to `acked` reached the responder: resends skip them.
    const SendWqe* w = completer_head(qp);
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

uint64_t sr_probe_interval(const Context& cx, const Qp& qp) {
  // Three round trips once one is known (a lost resend in a stalled window waits for this),
  // within [sr_probe_min_ns, sr_probe_ns]; each probe since the last progress waits twice as
  // long as the one before (TCP's back-off), so a silent peer costs a few packets, not one
  // every few hundred microseconds until the QP's timeout.
  const auto& c = cx.config();
  const uint64_t srtt = qp.rtt.srtt_ns();
  const uint64_t probe = srtt ? std::clamp(3 * srtt, c.sr_probe_min_ns, c.sr_probe_ns) : c.sr_probe_ns;
  return probe << std::min<uint32_t>(qp.comp.probes, 24);
}



uint32_t sr_window(const Context& cx) { return cx.config().window_pkts(true); }

// A SEND says where it goes, once the peer is known to take part: uroce's SEND opcode and a
// PlaceETH naming the receive WQE and the packet's place in the message.
void sr_shape_send(const Qp& qp, const SendWqe& w, uint32_t k, wire::Packet& p) {
  if (!qp.req.peer_sr || !traits(w.opcode).send) return;
  p.bth.opcode = wire::placed_send(p.bth.opcode);
  p.place = {w.recv_seq, k};
}

void sr_mark_request(const Qp& qp, const SendWqe& w, Psn psn, wire::Packet& p) {
  p.bth.sr = true;  // announced on every request
  p.bth.place = w.placeable;
  p.bth.resent = psn < qp.req.high;
}

// A resend skips what the responder holds, and stops after SrSendState::limit (new packets go
// on from Requester::high).
bool sr_skips(const Qp& qp, Psn psn, bool& stop) {
  stop = psn > qp.sr_send.limit;
  return !stop && sr_sacked(qp, psn);
}

void sr_on_go_back(Qp& qp) {
  qp.sr_send.limit = qp.req.high - 1;  // everything not held, unless a SACK narrows it
}

// A gap in the responses: a READ of a peer that takes part asks again only for the responses
// it lacks; anything else goes back to the gap, and only what the gap's request was resends
// (the requests after it arrived, or are reported missing on their own).
void sr_on_response_gap(Context& cx, Qp& qp, Psn from, Psn upto) {
  if (qp.req.peer_sr && completer_head(qp)->opcode == WrOpcode::RdmaRead) {
    sr_reask_reads(cx, qp, from, upto);
    return;
  }
  requester_go_back(cx, qp, from);
  qp.sr_send.limit = from;
  sr_mark(qp, from, false);
}

// A responder that takes part sends a plain ACK only while it holds nothing.
void sr_on_plain_ack(Qp& qp) {
  if (qp.req.peer_sr) qp.sr_send.sacked = {};
}

void sr_on_una_moved(Qp& qp, const wire::Packet& p, Psn before) {
  if (!qp.req.peer_settled) {  // the first answer that acknowledged a request: marked, or not
    qp.req.peer_sr = p.bth.sr;
    qp.req.peer_settled = true;
  }
  sr_forget(qp, before, qp.comp.una);
}

// The probe, after a short silence. With PSNs reported held, the holes below them were resent
// and lost again: all are resent once more. Otherwise the tail was lost, or the answers to it:
// the newest packet goes again, and the answer to it reports any hole before it. A READ whose
// responses were lost asks for them; a READ or atomic that never answered goes again.
void sr_probe(Context& cx, Qp& qp) {
  auto& c = qp.comp;
  auto& s = qp.sr_send;
  ++cx.ctr().sr_probes;
  SendWqe* w = completer_head(qp);
  if (w && !w->failed && w->opcode == WrOpcode::RdmaRead && qp.req.peer_sr && (w->resp_pkts || sr_reads_placed(qp))) {
    sr_reask_reads(cx, qp, w->first_psn + w->resp_pkts, sr_answered_upto(qp, *w));  // responses were lost
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
}

// Every hole goes again, and at least the oldest packet: the responder may hold all the rest,
// and its answer to that one says where it stands.
void sr_on_timeout(Qp& qp, Psn from) {
  qp.sr_send.resent_upto = qp.comp.una - 1;
  sr_mark(qp, from, false);
}

}  // namespace uroce::transport

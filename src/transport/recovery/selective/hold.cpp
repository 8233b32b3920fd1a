// Selective repeat, the responder's side (after IRN): requests that arrive past a hole are kept
// (the WRITE or SEND in progress placed in memory at once, where its PSN says) and reported in
// a selective ACK; they run in PSN order once a resend fills the hole, so completions and
// verbs semantics are go-back-N's. The requester's side is sender.cpp, its READs reads.cpp.
#include <algorithm>
#include <bit>
#include <cstring>

#include "transport/recovery/selective/selective.hpp"
#include "transport/roles.hpp"
#include "transport/sgl.hpp"
#include "verbs/region_access.hpp"

namespace uroce::transport {

using wire::kSackPsns;
using wire::Psn;

namespace {

uint32_t slot_of(Psn psn) { return psn.value() % kSackPsns; }

// Where the next SEND message starts, if that follows from what is known: at the expected PSN
// when no message is in progress; after the held LAST packet of the SEND in progress (the
// packet before the one `p` names as its message's first).
bool next_send_first(const Qp& qp, const wire::Packet& p, Psn& first) {
  const auto& r = qp.resp;
  if (r.msg == RespMsg::None) {
    first = r.epsn;
    return true;
  }
  if (r.msg != RespMsg::Send || !r.have_recv) return false;
  first = p.bth.psn - p.place.pkt;
  const HeldRequest& last = qp.sr_hold->slot[slot_of(first - 1)];
  return last.valid && last.p.bth.psn == first - 1 && last.p.has(wire::kPlaceEth) &&
         (last.p.info().flags & wire::kLast) && last.p.place.recv_seq == r.recv_taken - 1;
}

// Where a SEND packet past a hole goes, if it can go there now. Its place follows from its
// PSN: in the SEND in progress, at its index from that message's first PSN; or in the next
// message, when where that starts is known (next_send_first), and in the receive WQE posted
// next (without an SRQ, whose WQEs are taken in whatever order its QPs need them). Its
// PlaceETH must say the same, and its bytes fit that WQE, in SGEs the program may write.
// Everything else waits for its turn, a SEND to a tag matching SRQ's QP always.
bool place_send(Context& cx, Qp& qp, const wire::Packet& p) {
  const auto& r = qp.resp;
  if (qp.srq && qp.srq->tm) return false;  // its place follows from its TMH, read in sequence
  Psn first;
  uint32_t n = 0, cap = 0;
  const Sge* sges = nullptr;
  if (r.msg == RespMsg::Send && r.have_recv && p.place.recv_seq == r.recv_taken - 1) {
    first = r.msg_first;
    sges = r.recv_sges.data();
    n = uint32_t(r.recv_sges.size());
    cap = r.recv_len;
  } else if (!qp.srq && p.place.recv_seq == r.recv_taken && next_send_first(qp, p, first)) {
    const uint32_t next = qp.rq.done.load(std::memory_order_relaxed);
    if (next == qp.rq.prod.load(std::memory_order_acquire)) return false;  // not posted yet
    sges = qp.rq.sges(next);
    n = qp.rq.slot(next).num_sge;
    cap = qp.rq.slot(next).length;
  } else {
    return false;
  }
  const uint32_t k = Psn::distance(first, p.bth.psn), len = uint32_t(p.payload.size());
  const uint64_t offset = uint64_t(k) * qp.mtu();
  if (p.place.pkt != k || bool(p.info().flags & wire::kFirst) != (k == 0) || !len || offset + len > cap) return false;
  return sgl_scatter(cx.mrs(), qp.pd(), sges, n, offset, p.payload.data(), len) == verbs::KeyCheck::Ok;
}

// Where a later WRITE's packet past a hole goes: its own FIRST's RETH (a MIDDLE packet whose
// FIRST arrived before it, also past the hole, with Bth::place), or the FIRST itself. A FIRST
// is recorded only if it passes what the in-order path checks at a FIRST: the QP's
// REMOTE_WRITE right and its whole RETH in a region registered for remote writes.
bool later_write(Context& cx, Qp& qp, const wire::Packet& p, uint64_t& va, uint32_t& rkey) {
  SrHold& h = *qp.sr_hold;
  const uint32_t mtu = qp.mtu();
  if (p.info().flags & wire::kFirst) {
    if (p.reth.dma_len <= mtu || p.reth.dma_len > kMaxMessage || !(qp.attr().qp_access_flags & kAccessRemoteWrite) ||
        cx.check_remote(qp, verbs::Rkey(p.reth.rkey), p.reth.va, p.reth.dma_len, kAccessRemoteWrite) != verbs::KeyCheck::Ok)
      return false;
    h.writes[h.next_write++ % h.writes.size()] = {p.bth.psn, (p.reth.dma_len + mtu - 1) / mtu, p.reth.va, p.reth.rkey};
    va = p.reth.va;
    rkey = p.reth.rkey;
    return true;
  }
  for (const PlacedWrite& w : h.writes) {
    const uint32_t k = Psn::distance(w.first, p.bth.psn);
    if (w.npkts && Psn::distance(qp.resp.epsn, w.first) < kSackPsns && k > 0 && k + 1 < w.npkts) {
      va = w.va + uint64_t(k) * mtu;
      rkey = w.rkey;
      return true;
    }
  }
  return false;
}

// Where a WRITE FIRST or MIDDLE packet past a hole goes, if it can go there now: it belongs to
// the WRITE in progress (every earlier message has executed, so nothing earlier can overwrite
// it; its place follows from its PSN), or to a later WRITE its requester marked Bth::place
// (nothing before it still unfinished touches its bytes) whose address is known; and its bytes
// fall in a region registered for remote writes. Its payload is written there at once; everything
// else waits in order (a LAST or ONLY packet too, so that a program polling the last byte of a
// WRITE never sees it before the bytes ahead of it).
bool place_now(Context& cx, Qp& qp, const wire::Packet& p) {
  const auto& r = qp.resp;
  const uint32_t flags = p.info().flags, mtu = qp.mtu();
  if ((flags & wire::kLast) || !(flags & wire::kWrite) || p.payload.size() != mtu) return false;
  uint64_t va = 0;
  uint32_t rkey = 0;
  const uint64_t offset = r.write_offset + uint64_t(Psn::distance(r.epsn, p.bth.psn)) * mtu;
  if (r.msg == RespMsg::Write && !(flags & wire::kFirst) && offset + mtu <= r.write_len) {
    va = r.write_va + offset;
    rkey = r.write_rkey.value();
  } else if (!p.bth.place || !later_write(cx, qp, p, va, rkey)) {
    return false;
  }
  uint8_t* dst = nullptr;
  bool odp = false;
  // Refused, it is executed in order instead, and NAKed there.
  return cx.check_remote(qp, verbs::Rkey(rkey), va, mtu, kAccessRemoteWrite, &dst, &odp) == verbs::KeyCheck::Ok &&
         verbs::region_write(dst, p.payload.data(), mtu, odp);
}

// A request's opcode as RC has it: uroce's SEND opcodes are RC's plus 0xc8.
wire::Opcode rc_opcode(const wire::Packet& p) {
  return p.has(wire::kPlaceEth) ? wire::Opcode(uint8_t(p.bth.opcode) - 0xc8) : p.bth.opcode;
}

// Whether two requests for one PSN are the same: a resend repeats what was sent (all but the
// ACK request and resend marks, and a SEND's PlaceETH once the requester learned that we take
// part), anything else is someone else's.
bool same_request(const wire::Packet& a, const wire::Packet& b) {
  const uint32_t h = a.info().headers;
  return rc_opcode(a) == rc_opcode(b) && a.bth.solicited == b.bth.solicited && a.bth.place == b.bth.place &&
         (!(h & wire::kReth) || (a.reth.va == b.reth.va && a.reth.rkey == b.reth.rkey && a.reth.dma_len == b.reth.dma_len)) &&
         (!(h & wire::kAtomicEth) || (a.atomic.va == b.atomic.va && a.atomic.rkey == b.atomic.rkey &&
                                      a.atomic.swap_add == b.atomic.swap_add && a.atomic.compare == b.atomic.compare)) &&
         (!(h & wire::kImmDt) || a.imm == b.imm) && (!(h & wire::kFeth) || a.feth == b.feth) &&
         (!(h & b.info().headers & wire::kPlaceEth) ||
          (a.place.recv_seq == b.place.recv_seq && a.place.pkt == b.place.pkt)) &&
         std::ranges::equal(a.payload, b.payload);
}

void drop_held(Qp& qp, HeldRequest& s) {
  s.valid = false;
  s.bytes.clear();
  --qp.resp.held;
}

void clear_dispute(Qp& qp, HeldRequest& s) {
  if (!s.disputed) return;
  s.disputed = false;
  --qp.resp.disputed;
}

}  // namespace

// ---- responder ----

Verdict sr_hold(Context& cx, Qp& qp, const wire::Packet& p) {
  const uint32_t ahead = Psn::distance(qp.resp.epsn, p.bth.psn);
  cx.want_ack(qp);  // the requester learns what we have
  if (ahead >= kSackPsns) {  // past any window it may use: it sends this again
    ++cx.ctr().rx_out_of_sequence;
    return Verdict::OutOfSequence;
  }
  // What no turn could take is not kept: a FIRST or MIDDLE carries one MTU, a LAST or ONLY at
  // most one (IBA 9.7.5.2.4), so the hold is bounded by the window in MTUs.
  const uint32_t flags = p.info().flags, len = uint32_t(p.payload.size());
  if ((flags & wire::kPayload) && ((flags & wire::kLast) ? len > qp.mtu() : len != qp.mtu())) {
    ++cx.ctr().rx_sr_unfit;
    return Verdict::HeldUnfit;
  }
  if (!qp.sr_hold) qp.sr_hold = std::make_unique<SrHold>();
  SrHold& h = *qp.sr_hold;
  HeldRequest& s = h.slot[slot_of(p.bth.psn)];
  if (s.disputed && s.p.bth.psn == p.bth.psn) {  // only its turn takes a request for it now
    ++cx.ctr().rx_sr_conflicts;
    return Verdict::Conflict;
  }
  if (s.valid && s.p.bth.psn == p.bth.psn) {
    if (same_request(s.p, p)) {
      ++cx.ctr().rx_duplicate;
      return Verdict::Duplicate;
    }
    // One of them is a stranger's, and which cannot be told: neither is kept, none is taken for
    // this PSN before its turn (a SACK no longer reports it, so the requester sends it again).
    drop_held(qp, s);
    s.disputed = true;
    ++qp.resp.disputed;
    ++cx.ctr().rx_sr_conflicts;
    return Verdict::Conflict;
  }
  if (!s.valid) ++qp.resp.held;
  clear_dispute(qp, s);
  s.valid = true;
  s.p = p;
  s.bytes.assign(p.payload.begin(), p.payload.end());  // its own copy: the link's buffer is gone after this pass
  s.p.payload = {s.bytes.data(), s.bytes.size()};
  if (p.has(wire::kPlaceEth) ? place_send(cx, qp, p) : place_now(cx, qp, p)) ++cx.ctr().rx_sr_placed;
  ++cx.ctr().rx_sr_held;
  return Verdict::Held;
}

bool sr_holding(const Qp& qp) { return qp.resp.held != 0 || qp.resp.disputed != 0; }

void sr_conflicts(Context& cx, Qp& qp, const wire::Packet& p) {
  SrHold& h = *qp.sr_hold;
  HeldRequest& s = h.slot[slot_of(p.bth.psn)];
  if (s.p.bth.psn != p.bth.psn) return;
  clear_dispute(qp, s);
  if (!s.valid || same_request(s.p, p)) return;
  drop_held(qp, s);
  ++cx.ctr().rx_sr_conflicts;
}

namespace {

// Held copies of requests the responder has now passed (resent and taken in sequence, or
// inside a READ's PSN range) are dropped, and disputes about them settled.
void forget_passed(Qp& qp, Psn from) {
  SrHold& h = *qp.sr_hold;
  const uint32_t n = std::min(Psn::distance(from, qp.resp.epsn), kSackPsns);
  for (uint32_t i = 0; i < n && sr_holding(qp); ++i) {
    HeldRequest& s = h.slot[slot_of(from + i)];
    if (s.p.bth.psn != from + i) continue;
    if (s.valid) drop_held(qp, s);
    clear_dispute(qp, s);
  }
}

}  // namespace

void sr_release(Context& cx, Qp& qp, Psn from, uint64_t now, bool run) {
  auto& r = qp.resp;
  forget_passed(qp, from);
  for (uint32_t i = 0; run && i <= kSackPsns && r.held; ++i) {
    HeldRequest& s = qp.sr_hold->slot[slot_of(r.epsn)];
    if (!s.valid || s.p.bth.psn != r.epsn) return;
    from = r.epsn;
    r.on_trial = true;
    responder_execute(cx, qp, s.p, now);
    r.on_trial = false;
    if (r.epsn == from) {  // not taken (no receive WQE, or it would be rejected): the requester sends it again
      if (s.valid) drop_held(qp, s);
      return;
    }
    forget_passed(qp, from);
  }
}

void sr_send_sack(Context& cx, Qp& qp, Psn acked) {
  PacketBuf* tx = start_packet(cx, qp);
  if (!tx) return;  // like a lost ACK
  uint8_t bits[wire::kSackLen] = {};
  const Psn base = acked + 1;
  if (qp.sr_hold)
    for (uint32_t i = 1; i < kSackPsns; ++i) {
      const HeldRequest& s = qp.sr_hold->slot[slot_of(base + i)];
      if (s.valid && s.p.bth.psn == base + i) bits[i / 8] |= uint8_t(1u << (i % 8));
    }
  wire::Packet p = response_to(qp, wire::Opcode::UROCE_SACK, acked);
  p.aeth = wire::Aeth::ack(qp.resp.msn.value());
  const uint32_t at = wire::opcode_info(p.bth.opcode).header_len;
  std::copy(bits, bits + sizeof bits, tx->data + at);
  p.payload = {tx->data + at, sizeof bits};
  ++cx.ctr().tx_sacks;
  send_packet(cx, tx, p);
}

bool sr_holds(const Qp& qp, const wire::Packet& p) { return p.bth.sr && qp.resp.sr; }

void sr_after_request(Context& cx, Qp& qp, const wire::Packet& p, Verdict v, Psn from, uint64_t now) {
  auto& r = qp.resp;
  // The requester announces selective repeat on a request taken in sequence: answers carry the bit.
  if (v == Verdict::Execute && p.bth.sr) r.sr = true;
  // Held requests run once a resend fills the hole before them: only the requester's own
  // resend vouches that what lies past it was sent (a stranger's request ahead of a first
  // send waits for its PSN's real packet, and conflicts with it).
  if (sr_holding(qp)) sr_release(cx, qp, from, now, v == Verdict::Execute && p.bth.resent && r.sr);
}

// uroce's SEND opcodes: from a requester that takes part, or with the bit that announces it.
bool sr_takes_opcode(const Qp& qp, const wire::Packet& p) { return qp.resp.sr || p.bth.sr; }

bool sr_takes_partial_read(const Qp& qp, const wire::Packet& p) { return p.bth.sr && qp.resp.sr; }

// The requester learns that we take part from our first answer.
void sr_mark_answer(const Qp& qp, wire::Packet& p) { p.bth.sr = qp.resp.sr; }

}  // namespace uroce::transport

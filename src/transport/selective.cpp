// Selective repeat (IRN-style, between uroce QPs): a responder keeps requests that arrive past
// a hole (placing the WRITE in progress in memory at once) and reports them in a selective ACK;
// the requester resends only the holes below the highest PSN reported, again when a resend is
// seen lost, and a probe covers the tail of a burst, where nothing comes after a loss to report
// it. Requests are still executed in PSN order, so completions and verbs semantics are those of
// go-back-N. The completer's side (SACKs, probes) is in completer.cpp.
#include <algorithm>
#include <bit>
#include <cstring>

#include "transport/roles.hpp"
#include "transport/sgl.hpp"

namespace uroce::transport {

using core::Qp;
using wire::kSackPsns;
using wire::Psn;

namespace {

uint32_t slot_of(Psn psn) { return psn.value() % kSackPsns; }

// Where a SEND packet past a hole goes, if it can go there now: its PlaceETH names the
// receive WQE of the SEND in progress, or one posted and not yet taken (without an SRQ, whose
// WQEs are taken in whatever order its QPs need them), and its bytes fit in that WQE, in one
// SGE the program may write. Everything else waits for its turn.
uint8_t* place_send(Context& cx, Qp& qp, const wire::Packet& p) {
  const auto& r = qp.resp;
  const uint32_t len = uint32_t(p.payload.size());
  const uint64_t offset = uint64_t(p.place.pkt) * qp.mtu();
  const Sge* sges = nullptr;
  uint32_t n = 0, cap = 0;
  if (r.have_recv && p.place.recv_seq == r.recv_taken - 1) {
    sges = r.recv_sges.data();
    n = uint32_t(r.recv_sges.size());
    cap = r.recv_len;
  } else if (!qp.srq) {
    const uint32_t ahead = p.place.recv_seq - (r.recv_taken + 0u);
    const uint32_t first = qp.rq.done.load(std::memory_order_relaxed);
    if (ahead >= qp.rq.prod.load(std::memory_order_acquire) - first) return nullptr;  // not posted yet
    sges = qp.rq.sges(first + ahead);
    n = qp.rq.slot(first + ahead).num_sge;
    cap = qp.rq.slot(first + ahead).length;
  }
  if (!sges || !len || offset + len > cap) return nullptr;
  const uint8_t* at = sgl_locate(cx.mrs(), qp.pd(), sges, n, offset, len);
  if (!at || sgl_scatter(cx.mrs(), qp.pd(), sges, n, offset, p.payload.data(), len) != core::KeyCheck::Ok)
    return nullptr;
  return const_cast<uint8_t*>(at);
}

// Where a later WRITE's packet past a hole goes: its own FIRST's RETH (a MIDDLE packet whose
// FIRST arrived before it, also past the hole, with Bth::place), or the FIRST itself.
bool later_write(Qp& qp, const wire::Packet& p, uint64_t& va, uint32_t& rkey) {
  core::SrHold& h = *qp.sr_hold;
  const uint32_t mtu = qp.mtu();
  if (p.info().flags & wire::kFirst) {
    if (p.reth.dma_len <= mtu) return false;
    h.writes[h.next_write++ % h.writes.size()] = {p.bth.psn, (p.reth.dma_len + mtu - 1) / mtu, p.reth.va, p.reth.rkey};
    va = p.reth.va;
    rkey = p.reth.rkey;
    return true;
  }
  for (const core::PlacedWrite& w : h.writes) {
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
// it), or to a later WRITE its requester marked Bth::place (nothing before it still unfinished
// touches its bytes) whose address is known; and its bytes fall in a region registered for
// remote writes. Its payload is written there at once; everything else waits in order (a LAST
// or ONLY packet too, so that a program polling the last byte of a WRITE never sees it before
// the bytes ahead of it). Null: not placeable.
uint8_t* place_now(Context& cx, Qp& qp, const wire::Packet& p) {
  const auto& r = qp.resp;
  const uint32_t flags = p.info().flags, mtu = qp.mtu();
  if ((flags & wire::kLast) || !(flags & wire::kWrite) || p.payload.size() != mtu) return nullptr;
  uint64_t va = 0;
  uint32_t rkey = 0;
  const uint64_t offset = r.write_offset + uint64_t(Psn::distance(r.epsn, p.bth.psn)) * mtu;
  if (r.msg == core::RespMsg::Write && !(flags & wire::kFirst) && offset + mtu <= r.write_len) {
    va = r.write_va + offset;
    rkey = r.write_rkey.value();
  } else if (!p.bth.place || !later_write(qp, p, va, rkey)) {
    return nullptr;
  }
  uint8_t* dst = nullptr;
  if (cx.mrs().check_remote(core::Rkey(rkey), qp.pd(), va, mtu, kAccessRemoteWrite, &dst) != core::KeyCheck::Ok)
    return nullptr;  // executed in order, it is NAKed there
  std::memcpy(dst, p.payload.data(), mtu);
  return dst;
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
  if (!qp.sr_hold) qp.sr_hold = std::make_unique<core::SrHold>();
  core::SrHold& h = *qp.sr_hold;
  core::HeldRequest& s = h.slot[slot_of(p.bth.psn)];
  if (s.valid && s.p.bth.psn == p.bth.psn) {
    ++cx.ctr().rx_duplicate;
    return Verdict::Duplicate;
  }
  if (!s.valid) ++qp.resp.held;
  s.valid = true;
  s.p = p;
  const bool send = p.info().headers & wire::kPlaceEth;
  if (uint8_t* dst = send ? place_send(cx, qp, p) : place_now(cx, qp, p)) {
    s.bytes.clear();
    s.p.payload = {dst, p.payload.size()};  // executing it later finds its bytes in place
    ++cx.ctr().rx_sr_placed;
  } else {
    s.bytes.assign(p.payload.begin(), p.payload.end());
    s.p.payload = {s.bytes.data(), s.bytes.size()};
  }
  ++cx.ctr().rx_sr_held;
  return Verdict::Held;
}

bool sr_holding(const Qp& qp) { return qp.resp.held != 0; }

namespace {

// Held copies of requests the responder has now passed (resent and taken in sequence, or
// inside a READ's PSN range) are dropped.
void forget_passed(Qp& qp, Psn from) {
  core::SrHold& h = *qp.sr_hold;
  const uint32_t n = std::min(Psn::distance(from, qp.resp.epsn), kSackPsns);
  for (uint32_t i = 0; i < n && qp.resp.held; ++i) {
    core::HeldRequest& s = h.slot[slot_of(from + i)];
    if (s.valid && s.p.bth.psn == from + i) {
      s.valid = false;
      --qp.resp.held;
    }
  }
}

}  // namespace

void sr_release(Context& cx, Qp& qp, Psn from, uint64_t now) {
  auto& r = qp.resp;
  for (uint32_t i = 0; i <= kSackPsns && sr_holding(qp); ++i) {
    forget_passed(qp, from);
    core::HeldRequest& s = qp.sr_hold->slot[slot_of(r.epsn)];
    if (!r.held || !s.valid || s.p.bth.psn != r.epsn) return;
    from = r.epsn;
    responder_execute(cx, qp, s.p, now);
    if (r.epsn == from) {  // not taken (no receive WQE, or an error): the requester sends it again
      if (s.valid) {
        s.valid = false;
        --r.held;
      }
      return;
    }
  }
}

void sr_send_sack(Context& cx, Qp& qp, Psn acked) {
  TxPacket* tx = start_packet(cx, qp);
  if (!tx) return;  // like a lost ACK
  uint8_t bits[wire::kSackLen] = {};
  const Psn base = acked + 1;
  if (qp.sr_hold)
    for (uint32_t i = 1; i < kSackPsns; ++i) {
      const core::HeldRequest& s = qp.sr_hold->slot[slot_of(base + i)];
      if (s.valid && s.p.bth.psn == base + i) bits[i / 8] |= uint8_t(1u << (i % 8));
    }
  wire::Packet p;
  p.bth.opcode = wire::Opcode::UROCE_SACK;
  p.bth.dest_qp = qp.attr().dest_qp_num;
  p.bth.psn = acked;
  p.aeth = wire::Aeth::ack(qp.resp.msn.value());
  const uint32_t at = wire::opcode_info(p.bth.opcode).header_len;
  std::copy(bits, bits + sizeof bits, tx->data + at);
  p.payload = {tx->data + at, sizeof bits};
  ++cx.ctr().tx_sacks;
  send_packet(cx, tx, p);
}

// ---- requester and completer ----

bool sr_sacked(const Qp& qp, Psn psn) {
  const uint32_t k = slot_of(psn);
  return (qp.sr_send.sacked[k / 64] >> (k % 64)) & 1;
}

void sr_mark(Qp& qp, Psn psn, bool held) {
  if (!qp.req.sr) return;  // go-back-N keeps no such state
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

// ---- requester: READ responses past a gap ----

namespace {

uint32_t read_slot(Psn psn) { return psn.value() % core::SrReadMap::kSpan; }

// How many runs of missing responses one call asks for apart; the last run asked for reaches
// to the last missing response (the responder answers as many re-asks as it has READ resources).
constexpr uint32_t kMaxReasks = 8;

}  // namespace

bool sr_read_got(const Qp& qp, Psn psn) {
  if (!qp.sr_read) return false;
  const uint32_t k = read_slot(psn);
  return (qp.sr_read->got[k / 64] >> (k % 64)) & 1;
}

void sr_read_set(Qp& qp, Psn psn) {
  if (!qp.sr_read) qp.sr_read = std::make_unique<core::SrReadMap>();
  core::SrReadMap& m = *qp.sr_read;
  const uint32_t k = read_slot(psn);
  if (!m.count || Psn::distance(m.seen, psn) < core::SrReadMap::kSpan) m.seen = psn;  // the higher
  m.got[k / 64] |= uint64_t(1) << (k % 64);
  ++m.count;
}

bool sr_read_take(Qp& qp, Psn psn) {
  if (!sr_read_got(qp, psn)) return false;
  const uint32_t k = read_slot(psn);
  qp.sr_read->got[k / 64] &= ~(uint64_t(1) << (k % 64));
  --qp.sr_read->count;
  return true;
}

namespace {

// A READ request for the responses [from, to) of READ w only: the responder answers it from
// the READ it executed, as it answers a retried READ (responder.cpp, duplicate READs).
void reask(Context& cx, Qp& qp, const core::SendWqe& w, Psn from, Psn to) {
  TxPacket* tx = start_packet(cx, qp);
  if (!tx) return;  // like a lost request: the probe asks again
  const uint32_t mtu = qp.mtu();
  const uint64_t off = uint64_t(Psn::distance(w.first_psn, from)) * mtu;
  const uint64_t end = std::min<uint64_t>(uint64_t(Psn::distance(w.first_psn, to)) * mtu, w.length);
  wire::Packet p;
  p.bth.opcode = wire::Opcode::RC_READ_REQUEST;
  p.bth.dest_qp = qp.attr().dest_qp_num;
  p.bth.psn = from;
  p.bth.sr = true;
  p.reth = {w.remote_addr + off, w.rkey, uint32_t(end - off)};
  ++cx.ctr().sr_read_reasks;
  ++cx.ctr().retransmitted_packets;
  send_packet(cx, tx, p);
}

}  // namespace

void sr_reask_reads(Context& cx, Qp& qp, Psn from, Psn to) {
  auto& sq = qp.sq;
  const uint32_t prod = sq.prod.load(std::memory_order_acquire);
  uint32_t runs = 0;
  for (uint32_t i = sq.done.load(std::memory_order_relaxed); i != prod && sq.slot(i).assigned; ++i) {
    const core::SendWqe& w = sq.slot(i);
    if (w.first_psn >= to) break;
    if (w.failed || w.opcode != WrOpcode::RdmaRead || w.last_psn() < from) continue;
    Psn q = std::max(from, w.first_psn + w.resp_pkts);
    const Psn hi = std::min(to, w.last_psn() + 1);
    while (q < hi) {
      while (q < hi && sr_read_got(qp, q)) q += 1;
      if (!(q < hi)) break;
      Psn end = q + 1;
      if (++runs == kMaxReasks) {
        for (Psn e = end; e < hi; e += 1)
          if (!sr_read_got(qp, e)) end = e + 1;
      } else {
        while (end < hi && !sr_read_got(qp, end)) end += 1;
      }
      reask(cx, qp, w, q, end);
      if (runs == kMaxReasks) return;
      q = end;
    }
  }
}

uint64_t retransmit_timeout(const Context& cx, const Qp& qp) {
  const uint64_t t = core::transport_timeout_ns(qp.attr().timeout);
  if (!qp.req.sr || !t) return t;
  // Three round trips once one is known (a lost resend in a stalled window waits for this),
  // within [sr_probe_min_ns, sr_probe_ns].
  const auto& c = cx.config();
  const uint64_t probe = qp.rtt.srtt_ns ? std::clamp(3 * qp.rtt.srtt_ns, c.sr_probe_min_ns, c.sr_probe_ns) : c.sr_probe_ns;
  return std::min(t, probe);
}

}  // namespace uroce::transport

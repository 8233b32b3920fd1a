// Selective repeat, the requester's READs: responses that arrive past a lost one go into
// their READ's buffer at once, and only the lost ones are asked for again (a READ of just
// those packets, which the responder answers from the READ it executed).
#include <algorithm>

#include "transport/recovery/selective/selective.hpp"
#include "transport/roles.hpp"
#include "transport/sgl.hpp"

namespace uroce::transport {

using verbs::SendWqe;
using wire::Psn;

namespace {

uint32_t read_slot(Psn psn) { return psn.value() % SrReadMap::kSpan; }

// How many runs of missing responses one call asks for apart; the last run asked for reaches
// to the last missing response (the responder answers as many re-asks as it has READ resources).
constexpr uint32_t kMaxReasks = 8;

}  // namespace

bool sr_reads_placed(const Qp& qp) { return qp.sr_read && qp.sr_read->count; }

bool sr_read_got(const Qp& qp, Psn psn) {
  if (!qp.sr_read) return false;
  const uint32_t k = read_slot(psn);
  return (qp.sr_read->got[k / 64] >> (k % 64)) & 1;
}

void sr_read_set(Qp& qp, Psn psn) {
  if (!qp.sr_read) qp.sr_read = std::make_unique<SrReadMap>();
  SrReadMap& m = *qp.sr_read;
  const uint32_t k = read_slot(psn);
  if (!m.count || Psn::distance(m.seen, psn) < SrReadMap::kSpan) m.seen = psn;  // the higher
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
void reask(Context& cx, Qp& qp, const verbs::SendWqe& w, Psn from, Psn to) {
  PacketBuf* tx = start_packet(cx, qp);
  if (!tx) return;  // like a lost request: the probe asks again
  const uint32_t mtu = qp.mtu();
  const uint64_t off = uint64_t(Psn::distance(w.first_psn, from)) * mtu;
  const uint64_t end = std::min<uint64_t>(uint64_t(Psn::distance(w.first_psn, to)) * mtu, w.length);
  wire::Packet p;
  p.bth.opcode = wire::Opcode::RC_READ_REQUEST;
  p.bth.dest_qp = qp.attr().dest_qp_num;
  p.bth.psn = from;
  p.bth.sr = true;
  p.bth.resent = true;
  p.reth = {w.remote_addr + off, w.rkey, uint32_t(end - off)};
  ++cx.ctr().sr_read_reasks;
  ++cx.ctr().retransmitted_packets;
  ++qp.stats.retransmitted_packets;
  send_packet(cx, tx, p);
}

}  // namespace

void sr_reask_reads(Context& cx, Qp& qp, Psn from, Psn to) {
  auto& sq = qp.sq;
  const uint32_t prod = sq.prod.load(std::memory_order_acquire);
  uint32_t runs = 0;
  for (uint32_t i = sq.done.load(std::memory_order_relaxed); i != prod && sq.slot(i).assigned; ++i) {
    const verbs::SendWqe& w = sq.slot(i);
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


// Selective repeat: responses placed past a gap complete what they can once the gap is filled,
// in order; a SEND or WRITE between READs was executed if a later READ's response arrived.
void sr_advance_placed(Context& cx, Qp& qp, bool& progress) {
  while (qp.sr_read && qp.sr_read->count) {
    SendWqe* w = completer_head(qp);
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
Verdict sr_place_read_response(Context& cx, Qp& qp, const wire::Packet& p) {
  const Psn psn = p.bth.psn;
  SendWqe* h = completer_head(qp);
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
    completer_gap_retry(cx, qp, missing, psn);
    return Verdict::GapRetry;
  }
  const uint32_t k = Psn::distance(w->first_psn, psn);
  if (!read_response_fits(qp, *w, k, p)) {
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
    completer_fatal(cx, qp, WcStatus::LocProtErr);
    return Verdict::Fatal;
  }
  const bool first = !qp.sr_read || !qp.sr_read->count;
  const Psn from = first || qp.sr_read->seen < missing ? missing : qp.sr_read->seen + 1;
  sr_read_set(qp, psn);
  ++cx.ctr().rx_sr_read_placed;
  if (from < psn) {
    if (h->opcode != WrOpcode::RdmaRead && from == missing) completer_gap_retry(cx, qp, missing, psn);  // an atomic's answer
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
Verdict sr_on_passed_response(Context& cx, Qp& qp, SendWqe& w, const wire::Packet& p) {
  const Psn psn = p.bth.psn;
  const uint32_t k = Psn::distance(w.first_psn, psn);
  if (!read_response_fits(qp, w, k, p) ||
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

// The PSN after the last READ the responder is known to have executed, READ w (the oldest,
// which answered) or the one of the last response placed: parts of those may be asked for
// again. A READ that never answered is asked for again whole, as first sent, since the
// responder may never have had it: a part would be taken for a new, shorter READ.
Psn sr_answered_upto(Qp& qp, const SendWqe& w) {
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


}  // namespace uroce::transport

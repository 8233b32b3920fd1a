// Responder (IBA 9.7.5.2-9.7.6): checks each request's PSN, opcode sequence, length, keys and
// access; writes SEND and WRITE data (READs, atomics, FLUSH and ATOMIC WRITE: rd_atomic.cpp),
// generates receive completions, and answers with coalesced ACKs, NAKs, READ responses and
// atomic ACKs, all in PSN order. Duplicates are re-ACKed, duplicate READs re-executed, the
// other duplicates answered from their resources. An XRC target binds each message to the XRC
// SRQ it names (xrc_bind).
//
// Read first, in the InfiniBand Architecture Specification, volume 1: 9.7.5.2 (what a
// responder checks of each request, in on_request()'s order: PSN, opcode sequence, length,
// keys and access, then execution), 9.7.5.1 and 9.7.6 (duplicates: what is executed again and
// what only answered again), 9.9.3 (the error classes below), 9.8.3 (UC: the same checks with
// nothing answered).
//
// Each rejection names its IBA error class (9.9.3):
//   A  our own receive WQE is at fault (its memory is not ours to write): Remote Operational
//      Error NAK, the WQE completes in error, the QP goes to ERR;
//   B  a request ahead of the expected PSN, or no receive WQE yet: a PSN sequence error or RNR
//      NAK, and nothing else changes;
//   C  an invalid request (opcode sequence, length, access flags, too many READs/atomics) or a
//      remote access violation (key, bounds, rights): NAK, and the QP goes to ERR;
//   D  UC, which answers nothing: the message is dropped silently, up to the next FIRST/ONLY.
// A completion queue that overflows (class G) is the core's to handle (push_wc).
#include <algorithm>
#include <cstring>

#include "transport/recovery/recovery.hpp"
#include "transport/responder_parts.hpp"
#include "transport/sgl.hpp"
#include "transport/tag_matching.hpp"
#include "verbs/region_access.hpp"

namespace uroce::transport {

using verbs::Rkey;
using wire::Aeth;
using wire::NakCode;
using wire::Opcode;
using wire::Psn;

namespace {

void send_aeth(Context& cx, Qp& qp, Psn psn, Aeth aeth) {
  PacketBuf* tx = start_packet(cx, qp);
  if (!tx) return;  // like a lost ACK: the requester's timer recovers
  wire::Packet p = response_to(qp, Opcode::RC_ACKNOWLEDGE, psn);
  p.aeth = aeth;
  send_packet(cx, tx, p);
}

// Responses waiting to go out are bounded: READ/atomic jobs by max_dest_rd_atomic (new ones)
// plus as many duplicates, ACK/NAK jobs by this many more. Past that an ACK is dropped, as if
// lost: the requester's timer recovers.
constexpr size_t kMaxAethJobs = 16;

// What a queued job answers: an ACK/NAK, a READ/atomic executed (what max_dest_rd_atomic
// limits), or a duplicate READ/atomic answered again.
enum class JobClass : uint8_t { Aeth, Executed, Duplicate };

size_t count_jobs(const Qp& qp, JobClass c) {
  size_t n = 0;
  for (const RespJob& j : qp.resp.jobs)
    n += (j.kind == RespJobKind::Aeth || j.kind == RespJobKind::Sack ? JobClass::Aeth : j.dup ? JobClass::Duplicate : JobClass::Executed) == c;
  return n;
}

}  // namespace

size_t resp::rd_atomic_jobs(const Qp& qp) { return count_jobs(qp, JobClass::Executed); }
size_t resp::duplicate_jobs(const Qp& qp) { return count_jobs(qp, JobClass::Duplicate); }

void resp::queue_read(Context& cx, Qp& qp, Psn psn, uint64_t va, Rkey rkey, uint32_t len, bool dup) {
  RespJob j;
  j.kind = RespJobKind::Read;
  j.psn = psn;
  j.va = va;
  j.rkey = rkey;
  j.len = len;
  j.dup = dup;
  j.pd = qp.pd();
  qp.resp.jobs.push_back(j);
  cx.schedule(qp);
}

namespace {

// ACKs and NAKs may not overtake READ responses or atomic ACKs still queued (IBA 9.7.5.2.8).
void answer(Context& cx, Qp& qp, Psn psn, Aeth aeth, bool fatal = false) {
  auto& r = qp.resp;
  if (r.jobs.empty()) {
    send_aeth(cx, qp, psn, aeth);
    if (fatal) cx.qp_to_error(qp);
    return;
  }
  if (!fatal && count_jobs(qp, JobClass::Aeth) >= kMaxAethJobs) {
    ++cx.ctr().resp_queue_full;
    return;
  }
  RespJob j;
  j.kind = RespJobKind::Aeth;
  j.psn = psn;
  j.aeth_syndrome = aeth.syndrome;
  j.fatal = fatal;
  r.jobs.push_back(j);
  if (fatal) r.seq = RespSeq::Dying;  // the QP goes to ERR once the responses before the NAK have left
  cx.schedule(qp);
}

Verdict nak_verdict(NakCode code) {
  switch (code) {
    case NakCode::RemoteAccessError: return Verdict::NakAccess;
    case NakCode::RemoteOperationalError: return Verdict::NakOperational;
    case NakCode::PsnSequenceError: return Verdict::NakSequence;
    case NakCode::InvalidRequest:
    case NakCode::InvalidRdRequest: break;
  }
  return Verdict::NakInvalid;
}

// A request on trial (held past a hole by recovery) that would be rejected in its turn:
// dropped, not NAKed (a stranger's must not end the connection); the requester's own resend
// is judged in sequence.
Verdict held_unfit(Context& cx, Qp& qp) {
  ++cx.ctr().rx_sr_unfit;
  cx.want_ack(qp);  // the SACK no longer reports it: the requester sends it again
  return Verdict::HeldUnfit;
}

}  // namespace

// Class A and C (IBA 9.7.5.2.8, 9.9.3, 10.7.2.2): NAK, then the QP goes to ERR.
Verdict resp::fatal_nak(Context& cx, Qp& qp, Psn psn, NakCode code) {
  if (qp.resp.on_trial) return held_unfit(cx, qp);
  ++cx.ctr().tx_naks_fatal;
  ++qp.stats.tx_naks;
  answer(cx, qp, psn, Aeth::nak(qp.resp.msn.value(), code), /*fatal=*/true);
  return nak_verdict(code);
}

namespace {

using resp::fatal_nak;

// An error in a request: RC NAKs it and the QP goes to ERR (class A or C); UC has no NAKs and
// drops the message silently until the next FIRST or ONLY packet (class D, IBA 9.8.3).
Verdict reject(Context& cx, Qp& qp, Psn psn, NakCode code) {
  if (qp.type() == QpType::UC) {
    ++cx.ctr().rx_uc_dropped;
    qp.resp.seq = RespSeq::UcDropping;
    qp.resp.msg = RespMsg::None;
    return Verdict::UcDropped;
  }
  return fatal_nak(cx, qp, psn, code);
}

void recv_completion(Context& cx, Qp& qp, WcStatus st, WcOpcode op, uint32_t len, const wire::Packet* p) {
  auto& r = qp.resp;
  Wc wc;
  wc.wr_id = r.recv_wr_id;
  wc.status = st;
  wc.opcode = op;
  wc.byte_len = len;
  wc.qp_num = qp.qpn().value();
  wc.src_qp = qp.attr().dest_qp_num;
  if (p && (p->info().headers & wire::kImmDt)) {
    wc.with_imm = true;
    wc.imm_data = p->imm;
  }
  wc.with_inv = st == WcStatus::Success && p && p->has(wire::kIeth);
  wc.invalidated_rkey = wc.with_inv ? p->ieth : 0;
  wc.solicited = p && p->bth.solicited;
  r.have_recv = false;
  if (qp.srq && qp.srq->tm)
    tm::complete(cx, qp, wc);
  else
    cx.push_wc(qp.recv_cq, wc);
}

bool take_recv(Context& cx, Qp& qp) {
  auto& r = qp.resp;
  if (r.have_recv) return true;
  verbs::RecvWqe w;
  if (!cx.pop_recv(qp, w, r.recv_sges)) return false;
  r.recv_wr_id = w.wr_id;
  r.recv_len = w.length;
  r.recv_offset = 0;
  r.have_recv = true;
  ++r.recv_taken;
  r.tm.kind = TmKind::None;  // a WRITE with immediate's, on a QP of a tag matching SRQ
  return true;
}

Verdict rnr_nak(Context& cx, Qp& qp, Psn psn) {
  if (qp.type() == QpType::UC)  // no receive WQE: the message is lost (class D, IBA 9.8.3)
    return reject(cx, qp, psn, NakCode::InvalidRequest);
  ++cx.ctr().tx_rnr_naks;  // class B
  ++qp.stats.tx_rnr_naks;
  answer(cx, qp, psn, Aeth::rnr_nak(qp.resp.msn.value(), qp.attr().min_rnr_timer));
  return Verdict::Rnr;
}

Verdict do_send(Context& cx, Qp& qp, const wire::Packet& p) {
  auto& r = qp.resp;
  uint32_t flags = p.info().flags;
  const bool tagged = qp.srq && qp.srq->tm;
  if (flags & wire::kFirst) {
    if (!(tagged ? tm::take_recv(cx, qp, p) : take_recv(cx, qp))) {
      return rnr_nak(cx, qp, p.bth.psn);
    }
    r.recv_offset = 0;
    r.msg_first = p.bth.psn;
  }
  const std::span<const uint8_t> data = tagged ? tm::placed(qp, p) : p.payload;
  uint32_t len = uint32_t(data.size());
  // SEND with invalidate (IBA 10.6.7.2.4) names a bound type 2 window of this QP, or is refused
  // before a byte is placed (class C, as rxe): the receive completes in error.
  if (p.has(wire::kIeth) && !cx.mrs().can_invalidate(Rkey(p.ieth), qp.pd(), qp.qpn().value())) {
    if (r.on_trial) return held_unfit(cx, qp);
    ++cx.ctr().rx_bad_invalidate;
    recv_completion(cx, qp, WcStatus::RemInvReqErr, WcOpcode::Recv, r.recv_offset, &p);
    return reject(cx, qp, p.bth.psn, NakCode::InvalidRequest);
  }
  // From the hold, the receive taken stays for the requester's own resend of this packet.
  if (r.on_trial && uint64_t(r.recv_offset) + len > r.recv_len) return held_unfit(cx, qp);
  if (uint64_t(r.recv_offset) + len > r.recv_len) {
    recv_completion(cx, qp, WcStatus::LocLenErr, WcOpcode::Recv, r.recv_offset, &p);
    return reject(cx, qp, p.bth.psn, NakCode::InvalidRequest);  // longer than the receive: class C
  }
  if (sgl_scatter(cx.mrs(), qp.pd(), r.recv_sges.data(), uint32_t(r.recv_sges.size()), r.recv_offset,
                  data.data(), len) != verbs::KeyCheck::Ok) {
    if (r.on_trial) return held_unfit(cx, qp);
    recv_completion(cx, qp, WcStatus::LocProtErr, WcOpcode::Recv, r.recv_offset, &p);
    return reject(cx, qp, p.bth.psn, NakCode::RemoteOperationalError);  // our WQE's fault: class A
  }
  r.recv_offset += len;
  if (p.has(wire::kIeth)) cx.mrs().invalidate(Rkey(p.ieth), qp.pd(), qp.qpn().value());  // as it completes
  r.epsn = p.bth.psn + 1;
  if (flags & wire::kLast) {
    ++r.msn;
    r.msg = RespMsg::None;
    recv_completion(cx, qp, WcStatus::Success, WcOpcode::Recv, r.recv_offset, &p);
  } else {
    r.msg = RespMsg::Send;
  }
  if (p.bth.ack_req && reliable_connected(qp.type())) cx.want_ack(qp);
  return Verdict::Execute;
}

Verdict do_write(Context& cx, Qp& qp, const wire::Packet& p) {
  auto& r = qp.resp;
  uint32_t flags = p.info().flags;
  if (flags & wire::kFirst) {
    if (!(qp.attr().qp_access_flags & kAccessRemoteWrite) || p.reth.dma_len > kMaxMessage) {
      return reject(cx, qp, p.bth.psn, NakCode::InvalidRequest);  // class C
    }
    if (cx.check_remote(qp, Rkey(p.reth.rkey), p.reth.va, p.reth.dma_len, kAccessRemoteWrite) !=
        verbs::KeyCheck::Ok) {
      return reject(cx, qp, p.bth.psn, NakCode::RemoteAccessError);  // class C
    }
    r.write_va = p.reth.va;
    r.write_rkey = Rkey(p.reth.rkey);
    r.write_len = p.reth.dma_len;
    r.write_offset = 0;
  }
  bool imm = flags & wire::kCarriesImm;
  if (imm && !take_recv(cx, qp)) {
    return rnr_nak(cx, qp, p.bth.psn);
  }
  uint32_t len = uint32_t(p.payload.size());
  if (uint64_t(r.write_offset) + len > r.write_len ||
      ((flags & wire::kLast) && r.write_offset + len != r.write_len)) {
    return reject(cx, qp, p.bth.psn, NakCode::InvalidRequest);  // not the length its RETH gave: class C
  }
  if (len) {
    // Checked again per packet: deregistration revokes the key at once.
    uint8_t* dst = nullptr;
    bool odp = false;
    if (cx.check_remote(qp, r.write_rkey, r.write_va + r.write_offset, len, kAccessRemoteWrite, &dst, &odp) !=
            verbs::KeyCheck::Ok ||
        !verbs::region_write(dst, p.payload.data(), len, odp)) {
      return reject(cx, qp, p.bth.psn, NakCode::RemoteAccessError);  // class C
    }
  }
  r.write_offset += len;
  r.epsn = p.bth.psn + 1;
  if (flags & wire::kLast) {
    ++r.msn;
    r.msg = RespMsg::None;
    if (imm) recv_completion(cx, qp, WcStatus::Success, WcOpcode::RecvRdmaWithImm, r.write_len, &p);
  } else {
    r.msg = RespMsg::Write;
  }
  if (p.bth.ack_req && reliable_connected(qp.type())) cx.want_ack(qp);
  return Verdict::Execute;
}

Verdict on_duplicate(Context& cx, Qp& qp, const wire::Packet& p) {
  ++cx.ctr().rx_duplicate;
  if (p.info().flags & (wire::kRead | wire::kAtomic | wire::kFlush | wire::kAtomicWrite))
    return resp::on_duplicate_rd_atomic(cx, qp, p);
  cx.want_ack(qp);  // the requester lost our ACK: tell it again where we are
  return Verdict::Duplicate;
}

// What emitting one packet of a job left to do.
enum class Step { Done, More, NoBuffer };

// Emits the next packet of job j.
Step run_job(Context& cx, Qp& qp, RespJob& j) {
  auto& r = qp.resp;
  switch (j.kind) {
    case RespJobKind::Aeth:
      send_aeth(cx, qp, j.psn, Aeth{j.aeth_syndrome, r.msn.value()});
      if (j.fatal) cx.qp_to_error(qp);
      return Step::Done;
    case RespJobKind::Sack:
      recovery::send_sack(cx, qp, j.psn);
      return Step::Done;
    case RespJobKind::AtomicAck: {
      PacketBuf* tx = start_packet(cx, qp);
      if (!tx) return Step::NoBuffer;
      wire::Packet p = response_to(qp, Opcode::RC_ATOMIC_ACKNOWLEDGE, j.psn);
      p.aeth = Aeth::ack(r.msn.value());
      p.atomic_orig = j.atomic_orig;
      send_packet(cx, tx, p);
      return Step::Done;
    }
    case RespJobKind::Read: {
      const uint32_t mtu = qp.mtu();
      uint32_t n = packets_for(j.len, mtu);
      uint32_t k = j.sent / mtu;
      uint32_t len = std::min(mtu, j.len - j.sent);
      PacketBuf* tx = start_packet(cx, qp);
      if (!tx) return Step::NoBuffer;
      const Opcode op = n == 1       ? Opcode::RC_READ_RESPONSE_ONLY
                        : k == 0     ? Opcode::RC_READ_RESPONSE_FIRST
                        : k + 1 == n ? Opcode::RC_READ_RESPONSE_LAST
                                     : Opcode::RC_READ_RESPONSE_MIDDLE;
      wire::Packet p = response_to(qp, op, j.psn + k);
      p.aeth = Aeth::ack(r.msn.value());
      uint8_t* src = nullptr;
      bool odp = false;
      const uint32_t at = p.header_len();
      uint8_t* dst = tx->data + at;
      if (len && (cx.check_remote(qp, j.pd, j.rkey, j.va + j.sent, len, kAccessRemoteRead, &src, &odp) !=
                      verbs::KeyCheck::Ok ||
                  (odp && !verbs::region_read(dst, src, len, true)))) {
        // Deregistered (or an on-demand page gone) while its READ was answered: class C, NAK
        // now, before anything else.
        cx.release(tx);
        ++cx.ctr().tx_naks_fatal;
        ++qp.stats.tx_naks;
        r.jobs.clear();
        send_aeth(cx, qp, p.bth.psn, Aeth::nak(r.msn.value(), NakCode::RemoteAccessError));
        cx.qp_to_error(qp);
        return Step::Done;
      }
      if (len && !odp && !cx.by_reference(tx, at, src, len, true)) std::memcpy(dst, src, len);
      p.payload = {dst, len};
      send_packet(cx, tx, p);
      j.sent += len;
      return k + 1 == n ? Step::Done : Step::More;
    }
  }
  return Step::Done;
}


// UC (IBA 9.8.3): a gap in PSNs loses the message in progress; the next FIRST or ONLY packet
// starts over from its own PSN. Only forward, though: over IP a packet can be duplicated or
// arrive late, and one behind the expected PSN would deliver an old message again (rxe resyncs
// on it too; we drop it and leave the message in progress alone). Execute: go on with it.
Verdict uc_sequence(Context& cx, Qp& qp, const wire::Packet& p) {
  auto& r = qp.resp;
  const bool dropping = r.seq == RespSeq::UcDropping;
  if (p.bth.psn == r.epsn && !dropping) return Verdict::Execute;
  if (p.bth.psn < r.epsn) {
    ++cx.ctr().rx_duplicate;
    return Verdict::Duplicate;
  }
  if (p.info().flags & wire::kFirst) {
    if (r.msg != RespMsg::None && !dropping) ++cx.ctr().rx_uc_dropped;  // its tail was lost
    r.seq = RespSeq::InSequence;
    r.msg = RespMsg::None;
    r.epsn = p.bth.psn;
    return Verdict::Execute;
  }
  ++cx.ctr().rx_out_of_sequence;
  if (!dropping) ++cx.ctr().rx_uc_dropped;
  r.seq = RespSeq::UcDropping;
  r.msg = RespMsg::None;
  r.epsn = p.bth.psn + 1;
  return Verdict::UcDropped;
}

// An XRC target: the XRC SRQ a message names (XRCETH) must be of the QP's domain, and stays
// the same to its end; the message takes its receive, PD and CQ from it.
bool xrc_bind(Context& cx, Qp& qp, const wire::Packet& p) {
  if (qp.resp.msg != RespMsg::None) return qp.srq && p.xrc_srqn == qp.srq->handle();  // the one bound at its FIRST
  verbs::Srq* srq = cx.xrc_srq(p.xrc_srqn, qp.xrcd);
  if (!srq) return false;
  qp.srq = srq;
  qp.recv_cq = srq->cq;
  qp.set_pd(srq->pd());
  return true;
}

// The checks and execution of one request; responder_on_request traces the verdict.
Verdict on_request(Context& cx, Qp& qp, const wire::Packet& p) {
  auto& r = qp.resp;
  if (r.seq == RespSeq::Dying) {
    ++cx.ctr().rx_wrong_state;
    return Verdict::Dying;
  }
  if (qp.type() == QpType::UC)
    if (Verdict v = uc_sequence(cx, qp, p); v != Verdict::Execute) return v;
  int32_t d = Psn::diff(p.bth.psn, r.epsn);
  if (d < 0) return on_duplicate(cx, qp, p);
  if (d > 0 && recovery::holds(qp, p)) return recovery::hold(cx, qp, p);
  if (d > 0) {
    // Class B, IBA C9-91: one NAK per gap; later packets of the gap are dropped silently.
    ++cx.ctr().rx_out_of_sequence;
    if (r.seq == RespSeq::NakSent) return Verdict::OutOfSequence;
    r.seq = RespSeq::NakSent;
    ++cx.ctr().tx_naks_seq;
    ++qp.stats.tx_naks;
    answer(cx, qp, r.epsn, Aeth::nak(r.msn.value(), NakCode::PsnSequenceError));
    return Verdict::NakSequence;
  }
  r.seq = RespSeq::InSequence;
  if (qp.type() == QpType::XrcRecv && !xrc_bind(cx, qp, p)) {
    ++cx.ctr().rx_bad_xrc_srq;
    return reject(cx, qp, p.bth.psn, NakCode::InvalidRequest);  // class C
  }
  if (!fits_in_sequence(qp, p)) return reject(cx, qp, p.bth.psn, NakCode::InvalidRequest);  // class C (UC: D)
  const uint32_t flags = p.info().flags;
  if (flags & wire::kSend) return do_send(cx, qp, p);
  if (flags & wire::kWrite) return do_write(cx, qp, p);
  if (flags & wire::kRead) return resp::do_read(cx, qp, p);
  if (flags & wire::kFlush) return resp::do_flush(cx, qp, p);
  if (flags & wire::kAtomicWrite) return resp::do_atomic_write(cx, qp, p);
  return resp::do_atomic(cx, qp, p);
}

}  // namespace

bool fits_in_sequence(const Qp& qp, const wire::Packet& p) {
  const auto& r = qp.resp;
  const uint32_t flags = p.info().flags;
  // Opcode sequence (IBA 9.7.5.2.3): a message in progress must continue, no other may start.
  const bool cont = flags & (wire::kMiddle | wire::kLast) && !(flags & wire::kFirst);
  bool ok = r.msg == RespMsg::None   ? !cont
            : r.msg == RespMsg::Send ? cont && (flags & wire::kSend)
                                           : cont && (flags & wire::kWrite);
  // Length (IBA 9.7.5.2.4): FIRST and MIDDLE carry exactly one MTU, LAST and ONLY at most one.
  if (ok && (flags & wire::kPayload)) {
    const size_t n = p.payload.size();
    ok = (flags & wire::kLast) ? n <= qp.mtu() : n == qp.mtu();
  }
  return ok;
}

wire::Packet response_to(const Qp& qp, Opcode op, Psn psn) {
  wire::Packet p;
  p.bth.opcode = op;
  p.bth.dest_qp = qp.attr().dest_qp_num;
  p.bth.psn = psn;
  p.xrc = qp.type() == QpType::XrcRecv;
  recovery::mark_answer(qp, p);
  return p;
}

Verdict responder_execute(Context& cx, Qp& qp, const wire::Packet& p, uint64_t /*now*/) {
  Verdict v = on_request(cx, qp, p);
  cx.trace(qp, p, v);
  return v;
}

Verdict responder_on_request(Context& cx, Qp& qp, const wire::Packet& p, uint64_t now) {
  // At the expected PSN the request that arrives is executed, as any RoCE stack does.
  if (p.bth.psn == qp.resp.epsn) recovery::on_in_sequence(cx, qp, p);
  const Psn from = qp.resp.epsn;
  Verdict v = responder_execute(cx, qp, p, now);
  recovery::after_request(cx, qp, p, v, from, now);
  return v;
}

bool responder_run(Context& cx, Qp& qp, uint32_t& budget) {
  auto& jobs = qp.resp.jobs;
  while (!jobs.empty() && budget) {
    --budget;
    Step s = run_job(cx, qp, jobs.front());
    if (qp.state() == QpState::Err || jobs.empty()) return false;
    if (s == Step::NoBuffer) return true;
    if (s == Step::Done) jobs.pop_front();
  }
  return !jobs.empty();
}

void responder_flush_ack(Context& cx, Qp& qp) {
  auto& r = qp.resp;
  r.in_ack_list = false;
  if (!r.ack_pending || qp.state() == QpState::Err) {
    r.ack_pending = false;
    return;
  }
  r.ack_pending = false;
  if (recovery::acks_selectively(qp)) {  // a selective ACK, in its place behind queued responses like any ACK
    if (r.jobs.empty()) {
      recovery::send_sack(cx, qp, r.epsn - 1);
    } else if (count_jobs(qp, JobClass::Aeth) < kMaxAethJobs) {
      RespJob j;
      j.kind = RespJobKind::Sack;
      j.psn = r.epsn - 1;
      r.jobs.push_back(j);
      cx.schedule(qp);
    } else {
      ++cx.ctr().resp_queue_full;
    }
    return;
  }
  ++cx.ctr().tx_acks;
  answer(cx, qp, r.epsn - 1, Aeth::ack(r.msn.value()));
}

}  // namespace uroce::transport

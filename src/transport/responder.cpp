// Responder (IBA 9.7.5.2-9.7.6): checks each request's PSN, opcode sequence, length, keys and
// access; writes SEND and WRITE data, executes READs and atomics, generates receive
// completions, and answers with coalesced ACKs, NAKs, READ responses and atomic ACKs, all in
// PSN order. Duplicates are re-ACKed, duplicate READs re-executed, duplicate atomics replayed.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "transport/engines.hpp"
#include "transport/sgl.hpp"

namespace uroce::transport {

using core::Qp;
using core::RespJob;
using wire::Aeth;
using wire::NakCode;
using wire::Opcode;
using wire::Psn;

namespace {

void send_aeth(Nic& nic, Qp& qp, Psn psn, Aeth aeth) {
  TxPacket* tx = start_packet(nic, qp);
  if (!tx) return;  // like a lost ACK: the requester's timer recovers
  wire::Packet p;
  p.bth.opcode = Opcode::RC_ACKNOWLEDGE;
  p.bth.dest_qp = qp.attr().dest_qp_num;
  p.bth.psn = psn;
  p.aeth = aeth;
  send_packet(nic, tx, p);
}

// ACKs and NAKs may not overtake READ responses or atomic ACKs still queued (IBA 9.7.5.2.8).
void answer(Nic& nic, Qp& qp, Psn psn, Aeth aeth) {
  if (qp.resp.jobs.empty()) {
    send_aeth(nic, qp, psn, aeth);
    return;
  }
  RespJob j;
  j.kind = core::RespJobKind::Aeth;
  j.psn = psn;
  j.aeth_syndrome = aeth.syndrome;
  qp.resp.jobs.push_back(j);
  nic.schedule(qp);
}

// Class B/C errors (IBA 9.7.5.2.8, 10.7.2.2): NAK now, then the QP goes to ERR.
void fatal_nak(Nic& nic, Qp& qp, Psn psn, NakCode code) {
  ++nic.ctr().tx_naks_fatal;
  send_aeth(nic, qp, psn, Aeth::nak(qp.resp.msn, code));
  nic.qp_to_error(qp);
}

// An error in a request: RC NAKs it and the QP goes to ERR; UC has no NAKs and drops the
// message silently until the next FIRST or ONLY packet (IBA 9.8.3).
void reject(Nic& nic, Qp& qp, Psn psn, NakCode code) {
  if (qp.type() == QpType::UC) {
    ++nic.ctr().rx_uc_dropped;
    qp.resp.uc_drop = true;
    qp.resp.msg = core::RespMsg::None;
    return;
  }
  fatal_nak(nic, qp, psn, code);
}

void recv_completion(Nic& nic, Qp& qp, WcStatus st, WcOpcode op, uint32_t len, const wire::Packet* p) {
  auto& r = qp.resp;
  Wc wc;
  wc.wr_id = r.recv_wr_id;
  wc.status = st;
  wc.opcode = op;
  wc.byte_len = len;
  wc.qp_num = qp.qpn();
  wc.src_qp = qp.attr().dest_qp_num;
  if (p && (p->info().headers & wire::kImmDt)) {
    wc.with_imm = true;
    wc.imm_data = p->imm;
  }
  wc.solicited = p && p->bth.solicited;
  r.have_recv = false;
  nic.push_wc(qp.recv_cq, wc);
}

bool take_recv(Nic& nic, Qp& qp) {
  auto& r = qp.resp;
  if (r.have_recv) return true;
  core::RecvWqe w;
  if (!nic.pop_recv(qp, w, r.recv_sges)) return false;
  r.recv_wr_id = w.wr_id;
  r.recv_len = w.length;
  r.recv_offset = 0;
  r.have_recv = true;
  return true;
}

void rnr_nak(Nic& nic, Qp& qp, Psn psn) {
  if (qp.type() == QpType::UC) {  // no receive WQE: the message is lost (IBA 9.8.3)
    reject(nic, qp, psn, NakCode::InvalidRequest);
    return;
  }
  ++nic.ctr().tx_rnr_naks;
  answer(nic, qp, psn, Aeth::rnr_nak(qp.resp.msn, qp.attr().min_rnr_timer));
}

void do_send(Nic& nic, Qp& qp, const wire::Packet& p) {
  auto& r = qp.resp;
  uint32_t flags = p.info().flags;
  if (flags & wire::kFirst) {
    if (!take_recv(nic, qp)) {
      rnr_nak(nic, qp, p.bth.psn);
      return;
    }
    r.recv_offset = 0;
  }
  uint32_t len = uint32_t(p.payload.size());
  if (uint64_t(r.recv_offset) + len > r.recv_len) {
    recv_completion(nic, qp, WcStatus::LocLenErr, WcOpcode::Recv, r.recv_offset, &p);
    reject(nic, qp, p.bth.psn, NakCode::InvalidRequest);
    return;
  }
  if (sgl_copy(nic.mrs(), qp.pd(), r.recv_sges.data(), uint32_t(r.recv_sges.size()), r.recv_offset,
               const_cast<uint8_t*>(p.payload.data()), len, SglDir::FromBuffer) != core::KeyCheck::Ok) {
    recv_completion(nic, qp, WcStatus::LocProtErr, WcOpcode::Recv, r.recv_offset, &p);
    reject(nic, qp, p.bth.psn, NakCode::RemoteOperationalError);
    return;
  }
  r.recv_offset += len;
  r.epsn = p.bth.psn + 1;
  if (flags & wire::kLast) {
    r.msn = (r.msn + 1) & 0xffffff;
    r.msg = core::RespMsg::None;
    recv_completion(nic, qp, WcStatus::Success, WcOpcode::Recv, r.recv_offset, &p);
  } else {
    r.msg = core::RespMsg::Send;
  }
  if (p.bth.ack_req && qp.type() == QpType::RC) nic.want_ack(qp);
}

void do_write(Nic& nic, Qp& qp, const wire::Packet& p) {
  auto& r = qp.resp;
  uint32_t flags = p.info().flags;
  if (flags & wire::kFirst) {
    if (!(qp.attr().qp_access_flags & kAccessRemoteWrite)) {
      reject(nic, qp, p.bth.psn, NakCode::InvalidRequest);
      return;
    }
    if (nic.mrs().check_remote(p.reth.rkey, qp.pd(), p.reth.va, p.reth.dma_len, kAccessRemoteWrite, nullptr) !=
        core::KeyCheck::Ok) {
      reject(nic, qp, p.bth.psn, NakCode::RemoteAccessError);
      return;
    }
    r.write_va = p.reth.va;
    r.write_rkey = p.reth.rkey;
    r.write_len = p.reth.dma_len;
    r.write_offset = 0;
  }
  bool imm = flags & wire::kCarriesImm;
  if (imm && !take_recv(nic, qp)) {
    rnr_nak(nic, qp, p.bth.psn);
    return;
  }
  uint32_t len = uint32_t(p.payload.size());
  if (uint64_t(r.write_offset) + len > r.write_len ||
      ((flags & wire::kLast) && r.write_offset + len != r.write_len)) {
    reject(nic, qp, p.bth.psn, NakCode::InvalidRequest);
    return;
  }
  if (len) {
    // Checked again per packet: deregistration revokes the key at once.
    uint8_t* dst = nullptr;
    if (nic.mrs().check_remote(r.write_rkey, qp.pd(), r.write_va + r.write_offset, len, kAccessRemoteWrite, &dst) !=
        core::KeyCheck::Ok) {
      reject(nic, qp, p.bth.psn, NakCode::RemoteAccessError);
      return;
    }
    std::memcpy(dst, p.payload.data(), len);
  }
  r.write_offset += len;
  r.epsn = p.bth.psn + 1;
  if (flags & wire::kLast) {
    r.msn = (r.msn + 1) & 0xffffff;
    r.msg = core::RespMsg::None;
    if (imm) recv_completion(nic, qp, WcStatus::Success, WcOpcode::RecvRdmaWithImm, r.write_len, &p);
  } else {
    r.msg = core::RespMsg::Write;
  }
  if (p.bth.ack_req && qp.type() == QpType::RC) nic.want_ack(qp);
}

bool check_read(Nic& nic, Qp& qp, const wire::Packet& p) {
  return nic.mrs().check_remote(p.reth.rkey, qp.pd(), p.reth.va, p.reth.dma_len, kAccessRemoteRead, nullptr) ==
         core::KeyCheck::Ok;
}

void queue_read(Nic& nic, Qp& qp, const wire::Packet& p) {
  RespJob j;
  j.kind = core::RespJobKind::Read;
  j.psn = p.bth.psn;
  j.va = p.reth.va;
  j.rkey = p.reth.rkey;
  j.len = p.reth.dma_len;
  qp.resp.jobs.push_back(j);
  nic.schedule(qp);
}

size_t rd_atomic_jobs(const Qp& qp) {
  size_t n = 0;
  for (const RespJob& j : qp.resp.jobs) n += j.kind != core::RespJobKind::Aeth;
  return n;
}

void do_read(Nic& nic, Qp& qp, const wire::Packet& p) {
  auto& r = qp.resp;
  if (!(qp.attr().qp_access_flags & kAccessRemoteRead) || rd_atomic_jobs(qp) >= qp.attr().max_dest_rd_atomic) {
    fatal_nak(nic, qp, p.bth.psn, NakCode::InvalidRequest);
    return;
  }
  if (!check_read(nic, qp, p)) {
    fatal_nak(nic, qp, p.bth.psn, NakCode::RemoteAccessError);
    return;
  }
  queue_read(nic, qp, p);
  r.epsn = p.bth.psn + packets_for(p.reth.dma_len, qp.mtu());
  r.msn = (r.msn + 1) & 0xffffff;
}

void do_atomic(Nic& nic, Qp& qp, const wire::Packet& p) {
  auto& r = qp.resp;
  if (!(qp.attr().qp_access_flags & kAccessRemoteAtomic) || (p.atomic.va & 7) ||
      rd_atomic_jobs(qp) >= qp.attr().max_dest_rd_atomic) {
    fatal_nak(nic, qp, p.bth.psn, NakCode::InvalidRequest);
    return;
  }
  uint8_t* host = nullptr;
  if (nic.mrs().check_remote(p.atomic.rkey, qp.pd(), p.atomic.va, 8, kAccessRemoteAtomic, &host) !=
      core::KeyCheck::Ok) {
    fatal_nak(nic, qp, p.bth.psn, NakCode::RemoteAccessError);
    return;
  }
  // Atomic with respect to every other uroce atomic on this memory: all go through atomic_ref.
  std::atomic_ref<uint64_t> target(*reinterpret_cast<uint64_t*>(host));
  uint64_t orig;
  if (p.bth.opcode == Opcode::RC_COMPARE_SWAP) {
    orig = p.atomic.compare;
    target.compare_exchange_strong(orig, p.atomic.swap_add);
  } else {
    orig = target.fetch_add(p.atomic.swap_add);
  }
  if (!r.replay.empty()) {
    r.replay[r.replay_next % r.replay.size()] = {p.bth.psn, orig, true};
    ++r.replay_next;
  }
  RespJob j;
  j.kind = core::RespJobKind::AtomicAck;
  j.psn = p.bth.psn;
  j.atomic_orig = orig;
  r.jobs.push_back(j);
  nic.schedule(qp);
  r.epsn = p.bth.psn + 1;
  r.msn = (r.msn + 1) & 0xffffff;
}

void on_duplicate(Nic& nic, Qp& qp, const wire::Packet& p) {
  ++nic.ctr().rx_duplicate;
  uint32_t flags = p.info().flags;
  if (flags & wire::kRead) {
    // Re-execute, but only a READ wholly inside PSNs this responder has already passed.
    uint32_t n = packets_for(p.reth.dma_len, qp.mtu());
    if (Psn::distance(p.bth.psn, qp.resp.epsn) < n || !check_read(nic, qp, p)) return;
    ++nic.ctr().rx_read_dup;
    queue_read(nic, qp, p);
    return;
  }
  if (flags & wire::kAtomic) {
    for (const auto& e : qp.resp.replay) {
      if (e.valid && e.psn == p.bth.psn) {
        ++nic.ctr().rx_atomic_replays;
        RespJob j;
        j.kind = core::RespJobKind::AtomicAck;
        j.psn = p.bth.psn;
        j.atomic_orig = e.orig;
        qp.resp.jobs.push_back(j);
        nic.schedule(qp);
        return;
      }
    }
    return;  // too old to replay: drop, never execute twice
  }
  nic.want_ack(qp);  // the requester lost our ACK: tell it again where we are
}

// What emitting one packet of a job left to do.
enum class Step { Done, More, NoBuffer };

// Emits the next packet of job j.
Step run_job(Nic& nic, Qp& qp, RespJob& j) {
  auto& r = qp.resp;
  switch (j.kind) {
    case core::RespJobKind::Aeth:
      send_aeth(nic, qp, j.psn, Aeth{j.aeth_syndrome, r.msn});
      return Step::Done;
    case core::RespJobKind::AtomicAck: {
      TxPacket* tx = start_packet(nic, qp);
      if (!tx) return Step::NoBuffer;
      wire::Packet p;
      p.bth.opcode = Opcode::RC_ATOMIC_ACKNOWLEDGE;
      p.bth.dest_qp = qp.attr().dest_qp_num;
      p.bth.psn = j.psn;
      p.aeth = Aeth::ack(r.msn);
      p.atomic_orig = j.atomic_orig;
      send_packet(nic, tx, p);
      return Step::Done;
    }
    case core::RespJobKind::Read: {
      const uint32_t mtu = qp.mtu();
      uint32_t n = packets_for(j.len, mtu);
      uint32_t k = j.sent / mtu;
      uint32_t len = std::min(mtu, j.len - j.sent);
      TxPacket* tx = start_packet(nic, qp);
      if (!tx) return Step::NoBuffer;
      wire::Packet p;
      p.bth.opcode = n == 1           ? Opcode::RC_READ_RESPONSE_ONLY
                     : k == 0         ? Opcode::RC_READ_RESPONSE_FIRST
                     : k + 1 == n     ? Opcode::RC_READ_RESPONSE_LAST
                                      : Opcode::RC_READ_RESPONSE_MIDDLE;
      p.bth.dest_qp = qp.attr().dest_qp_num;
      p.bth.psn = j.psn + k;
      p.aeth = Aeth::ack(r.msn);
      uint8_t* src = nullptr;
      if (len && nic.mrs().check_remote(j.rkey, qp.pd(), j.va + j.sent, len, kAccessRemoteRead, &src) !=
                     core::KeyCheck::Ok) {
        nic.release(tx);
        fatal_nak(nic, qp, p.bth.psn, NakCode::RemoteAccessError);
        return Step::Done;
      }
      uint8_t* dst = tx->data + wire::opcode_info(p.bth.opcode).header_len;
      if (len) std::memcpy(dst, src, len);
      p.payload = {dst, len};
      send_packet(nic, tx, p);
      j.sent += len;
      return k + 1 == n ? Step::Done : Step::More;
    }
  }
  return Step::Done;
}

}  // namespace

// UC (IBA 9.8.3): a gap in PSNs loses the message in progress; the next FIRST or ONLY packet
// starts over from its own PSN. Only forward, though: over IP a packet can be duplicated or
// arrive late, and one behind the expected PSN would deliver an old message again (rxe resyncs
// on it too; we drop it and leave the message in progress alone). False: drop the packet.
bool uc_sequence(Nic& nic, Qp& qp, const wire::Packet& p) {
  auto& r = qp.resp;
  if (p.bth.psn == r.epsn && !r.uc_drop) return true;
  if (p.bth.psn < r.epsn) {
    ++nic.ctr().rx_duplicate;
    return false;
  }
  if (p.info().flags & wire::kFirst) {
    if (r.msg != core::RespMsg::None && !r.uc_drop) ++nic.ctr().rx_uc_dropped;  // its tail was lost
    r.uc_drop = false;
    r.msg = core::RespMsg::None;
    r.epsn = p.bth.psn;
    return true;
  }
  ++nic.ctr().rx_out_of_sequence;
  if (!r.uc_drop) ++nic.ctr().rx_uc_dropped;
  r.uc_drop = true;
  r.msg = core::RespMsg::None;
  r.epsn = p.bth.psn + 1;
  return false;
}

void responder_on_request(Nic& nic, Qp& qp, const wire::Packet& p, uint64_t /*now*/) {
  auto& r = qp.resp;
  if (qp.type() == QpType::UC && !uc_sequence(nic, qp, p)) return;
  int32_t d = Psn::diff(p.bth.psn, r.epsn);
  if (d < 0) {
    on_duplicate(nic, qp, p);
    return;
  }
  if (d > 0) {
    // IBA C9-91: one NAK per gap; later packets of the gap are dropped silently.
    ++nic.ctr().rx_out_of_sequence;
    if (!r.nak_sent) {
      r.nak_sent = true;
      ++nic.ctr().tx_naks_seq;
      answer(nic, qp, r.epsn, Aeth::nak(r.msn, NakCode::PsnSequenceError));
    }
    return;
  }
  r.nak_sent = false;
  uint32_t flags = p.info().flags;
  // Opcode sequence (IBA 9.7.5.2.3): a message in progress must continue, no other may start.
  bool cont = flags & (wire::kMiddle | wire::kLast) && !(flags & wire::kFirst);
  bool ok = r.msg == core::RespMsg::None   ? !cont
            : r.msg == core::RespMsg::Send ? cont && (flags & wire::kSend)
                                           : cont && (flags & wire::kWrite);
  // Length (IBA 9.7.5.2.4): FIRST and MIDDLE carry exactly one MTU, LAST and ONLY at most one.
  if (ok && (flags & wire::kPayload)) {
    size_t n = p.payload.size();
    ok = (flags & wire::kLast) ? n <= qp.mtu() : n == qp.mtu();
  }
  if (!ok) {
    reject(nic, qp, p.bth.psn, NakCode::InvalidRequest);
    return;
  }
  if (flags & wire::kSend)
    do_send(nic, qp, p);
  else if (flags & wire::kWrite)
    do_write(nic, qp, p);
  else if (flags & wire::kRead)
    do_read(nic, qp, p);
  else if (flags & wire::kAtomic)
    do_atomic(nic, qp, p);
}

bool responder_run(Nic& nic, Qp& qp, uint32_t& budget) {
  auto& jobs = qp.resp.jobs;
  while (!jobs.empty() && budget) {
    --budget;
    Step s = run_job(nic, qp, jobs.front());
    if (qp.state() == QpState::Err) return false;
    if (s == Step::NoBuffer) return true;
    if (s == Step::Done) jobs.pop_front();
  }
  return !jobs.empty();
}

void responder_flush_ack(Nic& nic, Qp& qp) {
  auto& r = qp.resp;
  r.in_ack_list = false;
  if (!r.ack_pending || qp.state() == QpState::Err) {
    r.ack_pending = false;
    return;
  }
  r.ack_pending = false;
  ++nic.ctr().tx_acks;
  answer(nic, qp, r.epsn - 1, Aeth::ack(r.msn));
}

}  // namespace uroce::transport

// Requester (IBA 9.7.4): segments send WQEs into request packets at the path MTU, assigns
// PSNs, keeps at most `max_inflight_pkts` unacknowledged and max_rd_atomic READ/atomics
// outstanding, honours fences, and resends from a given PSN on go-back-N.
#include <algorithm>
#include <cstring>

#include "transport/recovery/recovery.hpp"
#include "transport/roles.hpp"
#include "transport/sgl.hpp"

namespace uroce::transport {

void fail_wqe(Context& cx, Qp& qp, verbs::SendWqe& w, WcStatus st) {
  w.failed = true;
  w.error = st;
  completer_retire_failed(cx, qp);
}

using verbs::SendWqe;
using wire::Opcode;
using wire::Psn;

namespace {

constexpr uint32_t kUdOverhead = wire::kBthLen + wire::kDethLen + wire::kIcrcLen;

// A paced QP's request asks for an ACK if a quarter of its timeout passed since one last did.
bool ack_overdue(const Qp& qp, uint64_t now) {
  const uint64_t timeout = transport_timeout_ns(qp.attr().timeout);
  return timeout && now - qp.req.ack_asked_at >= timeout / 4;
}

uint32_t wqe_packets(const SendWqe& w, uint32_t mtu) {
  if (traits(w.opcode).atomic || traits(w.opcode).empty_reply) return 1;
  return packets_for(w.length, mtu);
}

// FIRST/MIDDLE/LAST/ONLY opcode for packet k of n of an RC SEND or WRITE (IBA 9.4.1.1).
Opcode segment_opcode_rc(const SendWqe& w, uint32_t k, uint32_t n) {
  const bool send = traits(w.opcode).send, imm = traits(w.opcode).imm, inv = w.opcode == WrOpcode::SendWithInv;
  if (n == 1) {
    if (inv) return Opcode::RC_SEND_ONLY_INV;
    if (send) return imm ? Opcode::RC_SEND_ONLY_IMM : Opcode::RC_SEND_ONLY;
    return imm ? Opcode::RC_WRITE_ONLY_IMM : Opcode::RC_WRITE_ONLY;
  }
  if (k == 0) return send ? Opcode::RC_SEND_FIRST : Opcode::RC_WRITE_FIRST;
  if (k + 1 < n) return send ? Opcode::RC_SEND_MIDDLE : Opcode::RC_WRITE_MIDDLE;
  if (inv) return Opcode::RC_SEND_LAST_INV;
  if (send) return imm ? Opcode::RC_SEND_LAST_IMM : Opcode::RC_SEND_LAST;
  return imm ? Opcode::RC_WRITE_LAST_IMM : Opcode::RC_WRITE_LAST;
}

// RC and UC share the layout: UC's opcodes are RC's plus 0x20.
Opcode segment_opcode(const SendWqe& w, uint32_t k, uint32_t n, bool uc) {
  Opcode rc = segment_opcode_rc(w, k, n);
  return uc ? Opcode(uint8_t(rc) + 0x20) : rc;
}


// Gives the next WQE its PSNs, if the window, fences and max_rd_atomic allow it to start now.
bool assign(Context& cx, Qp& qp, SendWqe& w, uint32_t window) {
  auto& req = qp.req;
  const bool rd_atomic = is_rd_atomic(w.opcode);
  if ((w.flags & kSendFence) && req.rd_atomic_out > 0) return false;  // IBA 10.8.3.3
  if (rd_atomic && req.rd_atomic_out >= std::max<uint32_t>(1, qp.attr().max_rd_atomic)) return false;
  if (recovery::window_full(qp, req.psn, window)) return false;
  if (!w.is_inline) {
    // READ and atomic results are written into the local SGEs.
    uint32_t need = rd_atomic ? uint32_t(kAccessLocalWrite) : 0u;
    if (sgl_check(cx.mrs(), qp.pd(), qp.sq.sges(req.next), w.num_sge, need) != verbs::KeyCheck::Ok) {
      fail_wqe(cx, qp, w, WcStatus::LocProtErr);
      return false;
    }
  }
  w.npkts = wqe_packets(w, qp.mtu());
  w.first_psn = req.psn;
  if (traits(w.opcode).send || traits(w.opcode).imm) w.recv_seq = req.recv_seq++;
  w.resp_pkts = 0;
  w.placeable = recovery::placeable(qp, w);
  w.assigned = true;
  req.psn += w.npkts;
  req.pkt = 0;
  if (rd_atomic) ++req.rd_atomic_out;
  return true;
}

// Headers and payload of packet req.pkt of WQE w (BTH PSN and QPN already set). `last`: it
// ends its message. False if gathering the payload failed the local key checks.
bool build_request(Context& cx, Qp& qp, const SendWqe& w, PacketBuf* tx, wire::Packet& p, bool& last) {
  auto& req = qp.req;
  const uint32_t mtu = qp.mtu(), offset = req.pkt * mtu;
  last = true;
  if (w.opcode == WrOpcode::RdmaRead) {
    // A retried READ asks only for the responses still missing (IBA 9.7.5.1.5).
    p.bth.opcode = Opcode::RC_READ_REQUEST;
    p.reth = {w.remote_addr + offset, w.rkey, w.length - std::min(offset, w.length)};
    return true;
  }
  if (traits(w.opcode).atomic) {
    bool cas = w.opcode == WrOpcode::AtomicCmpSwp;
    p.bth.opcode = cas ? Opcode::RC_COMPARE_SWAP : Opcode::RC_FETCH_ADD;
    p.atomic = {w.remote_addr, w.rkey, cas ? qp.sq.ext(req.next).swap : w.compare_add, cas ? w.compare_add : 0};
    return true;
  }
  if (w.opcode == WrOpcode::Flush) {
    p.bth.opcode = Opcode::RC_FLUSH;
    p.feth = w.imm;
    p.reth = {w.remote_addr, w.rkey, w.length};
    return true;
  }
  if (w.opcode == WrOpcode::AtomicWrite) {  // its 8 bytes, as the program gave them
    p.bth.opcode = Opcode::RC_ATOMIC_WRITE;
    p.reth = {w.remote_addr, w.rkey, 8};
    uint8_t* dst = tx->data + p.header_len();
    std::memcpy(dst, &w.compare_add, 8);
    p.payload = {dst, 8};
    return true;
  }
  p.bth.opcode = segment_opcode(w, req.pkt, w.npkts, qp.type() == QpType::UC);
  recovery::shape_send(qp, w, req.pkt, p);
  last = req.pkt + 1 == w.npkts;
  uint32_t len = std::min(mtu, w.length - offset);
  if (w.is_inline) {
    p.payload = {qp.sq.inline_data(req.next) + offset, len};
  } else {
    // Gather straight into the packet buffer, after the headers (or leave the bytes where
    // they are, for a link that copies them itself). Not a resend: it may leave after the
    // peer's answer has landed in the same buffer in this very pass (ibv_rc_pingpong sends
    // and receives in one), and its ICRC, computed now, must match the bytes it carries.
    const uint32_t at = p.header_len();
    uint8_t* dst = tx->data + at;
    const Sge* sges = qp.sq.sges(req.next);
    const bool resend = p.bth.psn < req.high;
    const uint8_t* src = cx.config().link_gathers && !resend
                             ? sgl_locate(cx.mrs(), qp.pd(), sges, w.num_sge, offset, len) : nullptr;
    if (!cx.by_reference(tx, at, src, len, reliable_connected(qp.type())) &&
        sgl_gather(cx.mrs(), qp.pd(), sges, w.num_sge, offset, dst, len) != verbs::KeyCheck::Ok)
      return false;
    p.payload = {dst, len};  // in place: encoding leaves it alone
  }
  if (req.pkt == 0 && traits(w.opcode).write)
    p.reth = {w.remote_addr, w.rkey, w.length};
  if (last) {
    p.imm = w.imm;
    p.ieth = w.imm;  // SEND with invalidate: the rkey (an IETH only its opcodes carry)
    p.bth.solicited = (w.flags & kSendSolicited) != 0;
  }
  return true;
}

// BIND_MW and LOCAL_INV (IBA 10.6.7, 10.7.x): the NIC's own work on its protection table.
WcStatus run_local(Context& cx, Qp& qp, const SendWqe& w, uint32_t idx) {
  if (w.opcode == WrOpcode::BindMw) return cx.mrs().bind_mw(qp.pd(), qp.qpn().value(), qp.sq.ext(idx).bind);
  return cx.mrs().invalidate(verbs::Rkey(w.imm), qp.pd(), qp.qpn().value()) ? WcStatus::Success
                                                                            : WcStatus::LocQpOpErr;
}

// Puts the requester at the packet carrying `psn` (a READ or atomic request whose PSN lies
// before it is passed whole), or at the first WQE not yet started.
void position_at(Qp& qp, Psn psn) {
  auto& sq = qp.sq;
  uint32_t prod = sq.prod.load(std::memory_order_acquire);
  uint32_t i = sq.done.load(std::memory_order_relaxed);
  for (; i != prod && sq.slot(i).assigned; ++i) {
    const SendWqe& w = sq.slot(i);
    if (is_rd_atomic(w.opcode)) {
      if (w.first_psn >= psn) break;
      continue;
    }
    if (psn <= w.last_psn()) {
      qp.req.next = i;
      qp.req.pkt = psn > w.first_psn ? Psn::distance(w.first_psn, psn) : 0;
      return;
    }
  }
  qp.req.next = i;
  qp.req.pkt = 0;
}

}  // namespace

PacketBuf* start_packet(Context& cx, const Qp& qp) {
  PacketBuf* tx = cx.alloc_tx();
  if (tx) {
    tx->flow = qp.flow;
    tx->src_qpn = qp.qpn().value();
    tx->tclass = qp.attr().traffic_class;
  }
  return tx;
}

void send_packet(Context& cx, PacketBuf* tx, wire::Packet& p) {
  cx.emit(tx, wire::encode(p, tx->data));
}

bool requester_run(Context& cx, Qp& qp, uint64_t now, uint32_t& budget) {
  // In SQD the send queue drains: a message already started is finished, no new one begins.
  QpState st = qp.state();
  if ((st != QpState::Rts && !(st == QpState::Sqd && qp.req.pkt > 0)) || qp.timers.armed(QpTimer::Rnr)) return false;
  auto& sq = qp.sq;
  auto& req = qp.req;
  uint32_t window = recovery::window(cx, qp);
  if (req.paced && qp.rate) window = std::min(window, qp.rate->window_pkts());
  const bool uc = qp.type() == QpType::UC;
  uint32_t prod = sq.prod.load(std::memory_order_acquire);

  while (req.next != prod) {
    if (budget == 0) return true;
    SendWqe& w = sq.slot(req.next);
    if (w.failed) return false;
    if (qp.type() == QpType::UD || qp.type() == QpType::RawPacket) {
      if (st != QpState::Rts) return false;
      if (req.paced && !pace(cx, qp, now)) return false;
      // What the pacer counts: a datagram's RoCE bytes (BTH, DETH, payload, ICRC), a frame whole.
      const uint32_t bytes = w.length + (qp.type() == QpType::UD ? kUdOverhead : 0);
      const bool sent = qp.type() == QpType::UD ? requester_send_datagram(cx, qp, w, req.next)
                                                : requester_send_frame(cx, qp, w, req.next);
      if (!sent) return true;
      if (req.paced) paced_send(qp, bytes, now);
      --budget;
      continue;
    }
    if (traits(w.opcode).local) {
      // No packet: done once everything before it has completed, so that a window changes
      // exactly between the requests around it and nothing resent can pass it.
      if (st != QpState::Rts || sq.done.load(std::memory_order_relaxed) != req.next) return false;
      if (const WcStatus s = run_local(cx, qp, w, req.next); s != WcStatus::Success) {
        fail_wqe(cx, qp, w, s);
        return false;
      }
      cx.complete_send(qp, w, WcStatus::Success);
      --budget;
      continue;
    }
    bool rd_atomic = is_rd_atomic(w.opcode);
    if (!w.assigned) {
      if (st != QpState::Rts) return false;
      if (!assign(cx, qp, w, window)) return false;
    }
    Psn psn = w.first_psn + req.pkt;
    if (psn < req.high) {  // a resend: recovery may skip it, or end the resend here
      const recovery::Resend r = recovery::on_resend(qp, psn);
      if (r == recovery::Resend::StopHere) {
        position_at(qp, req.high);
        continue;
      }
      if (r == recovery::Resend::SkipPacket) {
        if (rd_atomic || req.pkt + 1 == w.npkts) {
          ++req.next;
          req.pkt = 0;
        } else {
          ++req.pkt;
        }
        continue;
      }
    }
    if (recovery::window_full(qp, psn, window) && psn != qp.comp.una) return false;
    if (req.paced && !pace(cx, qp, now)) return false;

    PacketBuf* tx = start_packet(cx, qp);
    if (!tx) return true;
    wire::Packet p;
    p.bth.dest_qp = qp.attr().dest_qp_num;
    p.bth.psn = psn;
    if (qp.type() == QpType::XrcSend) {  // to the XRC SRQ the work request names
      p.xrc = true;
      p.xrc_srqn = qp.sq.ext(req.next).xrc_srqn;
    }
    recovery::mark_request(qp, w, psn, p);
    bool last = true;
    if (!build_request(cx, qp, w, tx, p, last)) {
      cx.release(tx);
      fail_wqe(cx, qp, w, WcStatus::LocProtErr);
      return false;
    }
    uint32_t inflight = Psn::distance(qp.comp.una, psn) + 1;
    // A paced QP spreads a message over time (a low rate limit, seconds): it asks for an ACK at
    // least every quarter of its timeout, so the ACKs for what arrived keep its transport timer
    // from firing for packets that have not left yet.
    const bool overdue = req.paced && ack_overdue(qp, now);
    p.bth.ack_req = !uc && (last || inflight % cx.config().ack_req_every == 0 || inflight + 1 >= window || overdue);
    if (p.bth.ack_req) req.ack_asked_at = now;
    send_packet(cx, tx, p);
    if (req.paced) paced_send(qp, tx->len, now);
    --budget;
    if (psn < req.high) {
      ++cx.ctr().retransmitted_packets;
      ++qp.stats.retransmitted_packets;
    } else {
      req.high = psn + 1;
      // Only a packet that asks for its ACK is timed: the others' ACKs wait for a later one.
      if (p.bth.ack_req) qp.rtt.on_send(psn, now);
    }

    if (uc) {
      // Unreliable: nothing is acknowledged, a WQE is done once its last packet left (IBA 9.8.2).
      qp.comp.una = psn + 1;
      if (!last) {
        ++req.pkt;
        continue;
      }
      req.pkt = 0;
      cx.complete_send(qp, w, WcStatus::Success);
      if (st != QpState::Rts) return false;
      continue;
    }
    if (last || rd_atomic) {
      ++req.next;
      req.pkt = 0;
      if (st != QpState::Rts) return false;
    } else {
      ++req.pkt;
    }
    if (!qp.timers.armed(QpTimer::Retransmit)) start_retransmit_timer(cx, qp, now);
  }
  req.pace_waited = false;  // everything posted has left: what comes next finds the pacer idle
  return false;
}

void requester_go_back(Context& cx, Qp& qp, Psn psn) {
  recovery::on_go_back(qp);
  qp.rtt.on_retransmit();
  auto& sq = qp.sq;
  uint32_t prod = sq.prod.load(std::memory_order_acquire);
  // Assigned WQEs are contiguous from the oldest uncompleted one.
  for (uint32_t i = sq.done.load(std::memory_order_relaxed); i != prod && sq.slot(i).assigned; ++i) {
    SendWqe& w = sq.slot(i);
    if (psn >= w.first_psn && psn <= w.last_psn()) {
      qp.req.next = i;
      qp.req.pkt = Psn::distance(w.first_psn, psn);
      auto& c = qp.comp;
      if (c.rewind != Rewind::GapRetried) c.rewind = Rewind::Rewound;
      c.rewound_to = psn;
      cx.schedule(qp);
      return;
    }
  }
}

}  // namespace uroce::transport

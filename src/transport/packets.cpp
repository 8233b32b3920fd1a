// Packets in and out: the ICRC check and dispatch of received packets to a QP's responder or
// completer, and the transmit buffer pool (engine lock held).
#include <algorithm>

#include "transport/recovery/recovery.hpp"
#include "transport/roles.hpp"
#include "wire/icrc.hpp"
#include "wire/packet.hpp"

namespace uroce::transport {

wire::Ipv4Fields ProtocolCore::on_packet(std::span<const uint8_t> buf, const wire::FlowAddr& from, uint64_t now,
                                wire::Ipv4Fields ip, const wire::ApartPayload* apart) {
  UROCE_ASSERT_HELD(*this);
  now_ = now;
  // A run counts as its packets (as many as one may hold: receive() refuses more).
  const uint32_t n = apart ? std::clamp(apart->packets, 1u, wire::kMaxRunPackets) : 1;
  ctr_.rx_packets += n;
  ctr_.rx_bytes += buf.size() * n + (apart ? apart->bytes.size() : 0);
  if (buf.size() < wire::kBthLen + wire::kIcrcLen) {  // empty datagrams included
    ctr_.rx_runt += n;
    return ip;
  }
  if (apart && !ip.icrc_absent) {  // a payload apart comes only from a link that carries packets intact
    ++ctr_.rx_malformed;
    return ip;
  }
  const McastGroup* group = nullptr;
  if (!is_local(from.dst)) {  // not ours, whatever QPN it names, unless a group QPs here joined
    if (!wire::is_multicast(from.dst)) {
      ctr_.rx_bad_dest += n;
      return ip;
    }
    if (!(group = group_for(from.dst))) {
      ctr_.rx_mcast_unjoined += n;
      return ip;
    }
  }
  if (ip.icrc_absent)
    ctr_.rx_icrc_absent += n;
  else switch (wire::icrc_check(from, buf, ip)) {
    case wire::IcrcMatch::Bad: ++ctr_.rx_bad_icrc; return ip;
    case wire::IcrcMatch::Seen: ++ctr_.rx_icrc_ip_seen; break;
    case wire::IcrcMatch::Assumed: ++ctr_.rx_icrc_ip_assumed; break;
    case wire::IcrcMatch::Solved: ++ctr_.rx_icrc_ip_solved; break;
  }
  if (group && apart)  // groups are never carried by a same-host ring
    ++ctr_.rx_malformed;
  else if (group)
    receive_multicast(*group, buf, from, ip);
  else
    receive(buf, from, now, ip, apart);
  return ip;
}

void ProtocolCore::receive(std::span<const uint8_t> buf, const wire::FlowAddr& from, uint64_t now, const wire::Ipv4Fields& ip,
                           const wire::ApartPayload* apart) {
  wire::Packet p;
  if (wire::decode(buf, p) != wire::ParseError::None) {
    ++ctr_.rx_malformed;
    return;
  }
  const uint32_t n = apart ? apart->packets : 1;
  if (apart) {  // the payload, whole and unpadded, where the headers end; a run's one per packet
    const std::optional<size_t> unit = wire::run_unit(*apart, buf.size());
    if (!(p.info().flags & wire::kPayload) || !p.payload.empty() || p.bth.pad || apart->at != p.header_len() ||
        !unit || *unit % 4 || (n > 1 && (!(p.info().flags & wire::kMiddle) || !*unit))) {
      ++ctr_.rx_malformed;
      return;
    }
    p.payload = apart->bytes;
  }
  dispatch(p, from, now, ip, buf.size() + p.payload.size() / n, n);
}

// Each packet of a run in its turn, as if it had come alone: the run's bytes, PSN counted up.
void ProtocolCore::dispatch_each(wire::Packet& p, const wire::FlowAddr& from, uint64_t now, const wire::Ipv4Fields& ip,
                                 size_t bytes, uint32_t n) {
  const std::span<const uint8_t> all = p.payload;
  const size_t unit = all.size() / n;
  const wire::Psn first = p.bth.psn;
  for (uint32_t i = 0; i < n; ++i) {
    p.bth.psn = first + i;
    p.payload = all.subspan(i * unit, unit);
    dispatch(p, from, now, ip, bytes, 1);
  }
}

void ProtocolCore::dispatch(wire::Packet& p, const wire::FlowAddr& from, uint64_t now, const wire::Ipv4Fields& ip,
                            size_t bytes, uint32_t n) {
  Qp* q = qp(Qpn(p.bth.dest_qp));
  if (!q) {
    ctr_.rx_unknown_qp += n;  // a run: each of its packets
    return;
  }
  if ((p.bth.pkey & 0x7fff) != 0x7fff) {  // we hold only the default partition
    ctr_.rx_bad_pkey += n;
    return;
  }
  const wire::OpcodeInfo& info = p.info();
  if (info.transport == wire::Transport::CNP) {  // to a connected QP, from its peer
    if (q->type() == QpType::UD || q->type() == QpType::RawPacket) {
      ++ctr_.rx_bad_opcode;
    } else if (from.src != q->flow.dst || from.dst != q->flow.src) {
      ++ctr_.rx_bad_source;
    } else {
      Context cx(*this);
      count_rx(*q, bytes);
      congestion_on_cnp(cx, *q, now);
    }
    return;
  }
  // XRC: requests to a target QP, answers to an initiator (Packet::xrc; the opcode is RC's).
  const QpType rc_kind = !p.xrc ? QpType::RC : info.flags & wire::kRequest ? QpType::XrcRecv : QpType::XrcSend;
  bool match = (info.transport == wire::Transport::RC && q->type() == rc_kind) ||
               (info.transport == wire::Transport::UC && q->type() == QpType::UC) ||
               (info.transport == wire::Transport::UD && q->type() == QpType::UD);
  // uroce's own opcodes (SENDs with a PlaceETH) only where recovery takes them: to any other
  // QP they are as unknown as to rxe or a NIC.
  if (!match || !recovery::takes_opcode(*q, p)) {
    ctr_.rx_bad_opcode += n;
    return;
  }
  if (q->type() == QpType::UD) {  // datagrams come from anyone
    QpState s = q->state();
    if (s != QpState::Rtr && s != QpState::Rts && s != QpState::Sqd) {
      ctr_.rx_wrong_state += n;
      return;
    }
    Context cx(*this);
    count_rx(*q, bytes);
    responder_on_datagram(cx, *q, p, from, ip);
    return;
  }
  if (from.src != q->flow.dst || from.dst != q->flow.src) {
    ctr_.rx_bad_source += n;
    return;
  }
  QpState st = q->state();
  Context cx(*this);
  if (info.flags & wire::kRequest) {
    if (st != QpState::Rtr && st != QpState::Rts && st != QpState::Sqd) {
      ctr_.rx_wrong_state += n;
      return;
    }
    if (n > 1) {  // whole where that equals its packets one by one, else one by one
      if (wire::ce_marked(ip.tos) || !responder_take_run(cx, *q, p, n)) return dispatch_each(p, from, now, ip, bytes, n);
      ++ctr_.rx_runs_whole;
      q->stats.rx_packets += n;
      q->stats.rx_bytes += bytes * n;
      return;
    }
    count_rx(*q, bytes);
    if (wire::ce_marked(ip.tos)) congestion_on_marked_request(cx, *q, p, now);
    responder_on_request(cx, *q, p, now);
  } else {
    if (st != QpState::Rts && st != QpState::Sqd) {
      ctr_.rx_wrong_state += n;
      return;
    }
    if (n > 1) return dispatch_each(p, from, now, ip, bytes, n);
    count_rx(*q, bytes);
    completer_on_response(cx, *q, p, now);
  }
}

PacketBuf* ProtocolCore::alloc_tx() {
  PacketBuf* p = pool_.alloc();
  if (!p) ++ctr_.tx_pool_exhausted;
  return p;
}

void ProtocolCore::emit(PacketBuf* p, size_t ib_len) {
  p->icrc_skipped = cfg_.carried_intact && cfg_.carried_intact(p->flow.dst, wire::bth_dest_qp(p->data));
  if (p->icrc_skipped)
    wire::icrc_store(p->data + ib_len, 0);
  else
    wire::icrc_fill(*p, ib_len);
  p->len = uint32_t(ib_len + wire::kIcrcLen);
  ++ctr_.tx_packets;
  ctr_.tx_bytes += p->len;
  if (Qp* q = qp(Qpn(p->src_qpn))) {
    ++q->stats.tx_packets;
    q->stats.tx_bytes += p->len;
  }
  tx_.push_back(p);
}

}  // namespace uroce::transport

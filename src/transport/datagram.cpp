// Unreliable Datagram (IBA 9.8.4): one packet per message, BTH + DETH (Q_Key, source QP), no
// connection, no acknowledgement. The receive buffer starts with 40 bytes for the GRH; for
// RoCE v2 it holds the packet's IPv6 header, or over IPv4 its last 20 bytes hold the IPv4
// header (IBA A17.4.5.1).
#include <algorithm>
#include <cstring>

#include "transport/roles.hpp"
#include "transport/sgl.hpp"

namespace uroce::transport {

using wire::Opcode;

bool requester_send_datagram(Context& cx, Qp& qp, verbs::SendWqe& w, uint32_t idx) {
  PacketBuf* tx = start_packet(cx, qp);
  if (!tx) return false;
  const verbs::SendWqeExt& x = qp.sq.ext(idx);
  tx->flow.src = cx.config().gids[x.ud_sgid_index];
  tx->flow.dst = x.ud_dgid;
  tx->tclass = x.ud_tclass;
  wire::Packet p;
  p.bth.opcode = w.opcode == WrOpcode::SendWithImm ? Opcode::UD_SEND_ONLY_IMM : Opcode::UD_SEND_ONLY;
  p.bth.dest_qp = x.ud_qpn;
  p.bth.psn = qp.req.psn;
  p.bth.solicited = (w.flags & kSendSolicited) != 0;
  // IBA 10.2.5: a Q_Key with the top bit set means "use the QP's own".
  p.deth = {(x.ud_qkey & 0x80000000u) ? qp.attr().qkey : x.ud_qkey, qp.qpn().value()};
  p.imm = w.imm;
  auto& sq = qp.sq;
  if (w.is_inline) {
    p.payload = {sq.inline_data(idx), w.length};
  } else {
    uint8_t* dst = tx->data + wire::opcode_info(p.bth.opcode).header_len;
    if (sgl_gather(cx.mrs(), qp.pd(), sq.sges(idx), w.num_sge, 0, dst, w.length) !=
        verbs::KeyCheck::Ok) {
      cx.release(tx);
      fail_wqe(cx, qp, w, WcStatus::LocProtErr);
      return true;
    }
    p.payload = {dst, w.length};
  }
  send_packet(cx, tx, p);
  qp.req.psn += 1;
  qp.comp.una = qp.req.psn;
  cx.complete_send(qp, w, WcStatus::Success);
  return true;
}

void responder_on_datagram(Context& cx, Qp& qp, const wire::Packet& p, const wire::FlowAddr& from,
                           const wire::Ipv4Fields& ip) {
  if (p.payload.size() > mtu_bytes(cx.config().port_mtu)) {  // a UD message is one packet of at most the MTU
    ++cx.ctr().rx_ud_too_long;
    return;
  }
  if (p.deth.qkey != qp.attr().qkey) {  // IBA C10-15: a wrong Q_Key is dropped silently
    ++cx.ctr().rx_bad_qkey;
    return;
  }
  verbs::RecvWqe w;
  std::vector<Sge>& sge_vec = qp.resp.recv_sges;  // scratch: UD keeps no message state
  if (!cx.pop_recv(qp, w, sge_vec)) {
    ++cx.ctr().rx_ud_no_recv;
    return;
  }
  const Sge* sges = sge_vec.data();
  uint32_t len = uint32_t(p.payload.size());
  Wc wc;
  wc.wr_id = w.wr_id;
  wc.opcode = WcOpcode::Recv;
  wc.qp_num = qp.qpn().value();
  wc.src_qp = p.deth.src_qp;
  wc.with_grh = true;
  wc.network_hdr = from.v4() ? NetworkHeader::Ipv4 : NetworkHeader::Ipv6;
  wc.solicited = p.bth.solicited;
  if (p.info().headers & wire::kImmDt) {
    wc.with_imm = true;
    wc.imm_data = p.imm;
  }
  if (uint64_t(kGrhBytes) + len > w.length) {
    wc.status = WcStatus::LocLenErr;
  } else {
    // The GRH area holds the IPv6 header, or for IPv4 20 unused bytes and the IPv4 header.
    uint8_t grh[kGrhBytes] = {};
    uint8_t hdr[wire::kIpv6Len + wire::kUdpLen];
    wire::write_ip_udp(hdr, from, len + wire::kIcrcLen, ip);
    if (from.v4())
      std::memcpy(grh + 20, hdr, wire::kIpv4Len);
    else
      std::memcpy(grh, hdr, wire::kIpv6Len);
    auto st = sgl_scatter(cx.mrs(), qp.pd(), sges, w.num_sge, 0, grh, kGrhBytes);
    if (st == verbs::KeyCheck::Ok && len)
      st = sgl_scatter(cx.mrs(), qp.pd(), sges, w.num_sge, kGrhBytes, p.payload.data(), len);
    wc.status = st == verbs::KeyCheck::Ok ? WcStatus::Success : WcStatus::LocProtErr;
    wc.byte_len = kGrhBytes + len;
  }
  cx.push_wc(qp.recv_cq, wc);
}

}  // namespace uroce::transport

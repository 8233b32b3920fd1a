// Raw packet QPs: whole Ethernet frames, as mlx5 gives them to DPDK-style programs. A send
// WQE's bytes leave as one frame, untouched; a frame from the interface goes to the QP of the
// flow rule it matches (flow_table.hpp) and fills one receive WQE. No header of ours, no
// acknowledgement, no ordering beyond the interface's: the core only checks lengths and keys.
#include "transport/context.hpp"
#include "transport/roles.hpp"
#include "transport/sgl.hpp"

namespace uroce::transport {

bool requester_send_frame(Context& cx, Qp& qp, verbs::SendWqe& w, uint32_t idx) {
  std::vector<uint8_t> frame(w.length);
  auto& sq = qp.sq;
  if (w.is_inline) {
    std::memcpy(frame.data(), sq.inline_data(idx), w.length);
  } else if (sgl_gather(cx.mrs(), qp.pd(), sq.sges(idx), w.num_sge, 0, frame.data(), w.length) !=
             verbs::KeyCheck::Ok) {
    fail_wqe(cx, qp, w, WcStatus::LocProtErr);
    return true;
  }
  // Four bytes past an untagged frame's largest are for an 802.1Q/802.1ad tag, if it has one.
  const bool tagged = frame.size() >= 14 && ((frame[12] == 0x81 && frame[13] == 0x00) || (frame[12] == 0x88 && frame[13] == 0xa8));
  if (!tagged && frame.size() + 4 > cx.config().raw_frame_max) {
    fail_wqe(cx, qp, w, WcStatus::LocLenErr);
    return true;
  }
  cx.emit_frame(std::move(frame));
  ++cx.ctr().tx_raw_frames;
  qp.req.psn += 1;
  qp.comp.una = qp.req.psn;
  cx.complete_send(qp, w, WcStatus::Success);
  return true;
}

Result<uint32_t> ProtocolCore::create_flow(Qp& qp, const FlowRule& rule) {
  UROCE_ASSERT_HELD(*this);
  if (qp.type() != QpType::RawPacket) return make_error(EINVAL, "create_flow: flow rules steer to raw packet QPs only");
  if (rule.ipv4 && rule.ipv6) return make_error(EINVAL, "create_flow: a rule names IPv4 or IPv6, not both");
  if (flows_.size() >= limits_.max_flows) return make_error(ENOMEM, "create_flow: too many flow rules");
  return flows_.add(&qp, rule);
}

Status ProtocolCore::destroy_flow(Qp& qp, uint32_t handle) {
  UROCE_ASSERT_HELD(*this);
  if (!flows_.owns(handle, &qp) || !flows_.remove(handle)) return make_error(EINVAL, "destroy_flow: no such rule on this QP");
  return {};
}

Result<verbs::Srq*> ProtocolCore::create_wq(PdHandle pd, verbs::Cq* cq, uint32_t depth, uint32_t max_sge) {
  UROCE_ASSERT_HELD(*this);
  if (!cq || !cq_users_.count(cq)) return make_error(EINVAL, "create_wq: unknown completion queue");
  auto wq = create_srq(pd, depth, max_sge);
  if (!wq) return wq;
  (*wq)->wq = true;
  (*wq)->cq = cq;
  ++cq_users_[cq];
  return wq;
}

Status ProtocolCore::modify_wq(verbs::Srq& wq, WqState state) {
  UROCE_ASSERT_HELD(*this);
  if (!wq.wq) return make_error(EINVAL, "modify_wq: not a work queue");
  if (state != WqState::Reset && state != WqState::Ready && state != WqState::Err)
    return make_error(EINVAL, "modify_wq: RESET, RDY or ERR");
  if (wq.wq_state == WqState::Reset && state == WqState::Err)
    return make_error(EINVAL, "modify_wq: RESET goes to RDY first");
  wq.wq_state = state;
  if (state == WqState::Ready) return {};
  // Leaving RDY: in ERR what was posted completes flushed; in RESET it is gone.
  auto& rq = wq.rq;
  const uint32_t prod = rq.prod.load(std::memory_order_acquire);
  Wc wc;
  wc.status = WcStatus::WrFlushErr;
  wc.opcode = WcOpcode::Recv;
  wc.qp_num = wq.handle();
  for (uint32_t i = rq.done.load(std::memory_order_relaxed); i != prod; ++i) {
    if (state == WqState::Err) {
      wc.wr_id = rq.slot(i).wr_id;
      push_wc(wq.cq, wc);
    }
    rq.done.store(i + 1, std::memory_order_release);
  }
  return {};
}

Result<Qp*> ProtocolCore::create_rss_qp(PdHandle pd, std::vector<verbs::Srq*> table, const RxHash& hash) {
  UROCE_ASSERT_HELD(*this);
  const size_t n = table.size();
  if (n == 0 || (n & (n - 1)) || n > limits_.max_rwq_table)
    return make_error(EINVAL, "create_rss_qp: the indirection table holds a power of two of work queues, at most " +
                                  std::to_string(limits_.max_rwq_table));
  for (verbs::Srq* wq : table)
    if (!wq || !srq_users_.count(wq) || !wq->wq || wq->pd() != pd)
      return make_error(EINVAL, "create_rss_qp: each table entry must be a work queue of the QP's PD");
  if (hash.fields & ~kHashFieldsKnown) return make_error(EOPNOTSUPP, "create_rss_qp: hash fields beyond IPv4/IPv6 and ports");
  const uint64_t v4 = kHashSrcIpv4 | kHashDstIpv4, v6 = kHashSrcIpv6 | kHashDstIpv6;
  const uint64_t tcp = kHashSrcPortTcp | kHashDstPortTcp, udp = kHashSrcPortUdp | kHashDstPortUdp;
  if (((hash.fields & v4) && (hash.fields & v6)) || ((hash.fields & tcp) && (hash.fields & udp)))
    return make_error(EINVAL, "create_rss_qp: hash IPv4 or IPv6 fields, TCP or UDP ports, not both (as mlx5)");
  if (!hash.fields && n > 1) return make_error(EINVAL, "create_rss_qp: a table of several queues needs hash fields");
  if (hash.key.size() < 40 || hash.key.size() > 128) return make_error(EINVAL, "create_rss_qp: the hash key is 40..128 bytes");
  auto qp = make_qp(pd, QpType::RawPacket, table[0]->cq, table[0]->cq, QpCap{1, 1, 1, 1, 0}, false, nullptr, std::nullopt);
  if (!qp) return qp;
  (*qp)->rss = std::make_unique<Qp::Rss>(Qp::Rss{std::move(table), hash});
  for (verbs::Srq* wq : (*qp)->rss->table) ++srq_users_[wq];
  return qp;
}

bool ProtocolCore::on_frame(std::span<const uint8_t> frame) {
  UROCE_ASSERT_HELD(*this);
  const auto [qp, hash] = flows_.steer(frame);
  if (!qp) return false;  // the interface's other traffic: not ours
  // Where it goes: the QP's own receive queue (or SRQ), or for an RSS QP the work queue its
  // hash picks, which completes to its own CQ under its own number. An RSS QP has no state
  // of its own to reach (as mlx5's): its work queues are ready or not.
  const QpState st = qp->state();
  if (!qp->rss && st != QpState::Rtr && st != QpState::Rts && st != QpState::Sqd) {
    ++ctr_.rx_raw_not_ready;
    return false;
  }
  verbs::Srq* wq = nullptr;
  if (qp->rss) {
    wq = qp->rss->table[hash & (qp->rss->table.size() - 1)];
    if (wq->wq_state != WqState::Ready) {
      ++ctr_.rx_raw_not_ready;
      return false;
    }
  }
  verbs::RecvWqe w;
  std::vector<Sge>& sges = qp->resp.recv_sges;  // scratch: a frame keeps no message state
  if (!(wq ? pop_recv_from(wq->rq, wq, w, sges) : pop_recv(*qp, w, sges))) {
    ++ctr_.rx_raw_no_recv;
    return false;
  }
  ++ctr_.rx_raw_frames;
  Wc wc;
  wc.wr_id = w.wr_id;
  wc.opcode = WcOpcode::Recv;
  wc.qp_num = wq ? wq->handle() : qp->qpn().value();
  const auto len = uint32_t(frame.size());
  wc.byte_len = len;
  if (len > w.length) {
    wc.status = WcStatus::LocLenErr;
  } else {
    auto r = sgl_scatter(mrs_, qp->pd(), sges.data(), w.num_sge, 0, frame.data(), len);
    wc.status = r == verbs::KeyCheck::Ok ? WcStatus::Success : WcStatus::LocProtErr;
  }
  push_wc(wq ? wq->cq : qp->recv_cq, wc);
  return true;
}

}  // namespace uroce::transport

// XRC's objects (IBA 9.8.x, eXtended Reliable Connected): domains, the XRC SRQs of a domain,
// and target QPs. A target QP has no PD, CQ or receive queue: each message it takes names an
// XRC SRQ in its XRCETH, which must be of the QP's domain; the message then draws its receive
// from that SRQ, is checked against the SRQ's PD and completes to the SRQ's CQ (responder.cpp
// binds it). Initiator QPs are RC requesters that name the remote XRC SRQ in each request.
#include <algorithm>

#include "transport/protocol_core.hpp"

namespace uroce::transport {

Result<uint32_t> ProtocolCore::create_xrcd() {
  UROCE_ASSERT_HELD(*this);
  if (xrcds_.size() >= limits_.max_xrcd) return make_error(ENOMEM, "open_xrcd: too many XRC domains");
  const uint32_t h = next_xrcd_++;
  xrcds_[h] = 0;
  return h;
}

Status ProtocolCore::destroy_xrcd(uint32_t xrcd) {
  UROCE_ASSERT_HELD(*this);
  auto it = xrcds_.find(xrcd);
  if (it == xrcds_.end()) return make_error(EINVAL, "close_xrcd: unknown XRC domain");
  if (it->second) return make_error(EBUSY, "close_xrcd: XRC SRQs or target QPs still use it");
  xrcds_.erase(it);
  return {};
}

bool ProtocolCore::xrcd_busy(uint32_t xrcd) const {
  UROCE_ASSERT_HELD(*this);
  auto it = xrcds_.find(xrcd);
  return it != xrcds_.end() && it->second;
}

Result<verbs::Srq*> ProtocolCore::create_xrc_srq(PdHandle pd, uint32_t xrcd, verbs::Cq* cq, uint32_t depth,
                                                 uint32_t max_sge) {
  UROCE_ASSERT_HELD(*this);
  auto x = xrcds_.find(xrcd);
  if (x == xrcds_.end()) return make_error(EINVAL, "create_srq: unknown XRC domain");
  if (!cq || !cq_users_.count(cq)) return make_error(EINVAL, "create_srq: an XRC SRQ needs a completion queue");
  if (next_srq_ > wire::kQpnMask) return make_error(ENOMEM, "create_srq: SRQ numbers (24 bits) exhausted");
  auto srq = create_srq(pd, depth, max_sge);
  if (!srq) return srq;
  (*srq)->xrcd = xrcd;
  (*srq)->cq = cq;
  ++x->second;
  ++cq_users_[cq];
  return srq;
}

void ProtocolCore::release_xrc_srq(verbs::Srq& srq) {
  --xrcds_[srq.xrcd];
  --cq_users_[srq.cq];
  // A target QP in the middle of a message to it loses the message: its next packet is no
  // continuation of anything (invalid request), its receive is gone with the SRQ.
  for (auto& [qpn, qp] : qps_) {
    if (qp->srq != &srq) continue;
    qp->srq = nullptr;
    qp->recv_cq = nullptr;
    qp->set_pd(PdHandle{});
    qp->resp.have_recv = false;
    qp->resp.msg = RespMsg::None;
  }
}

Result<Qp*> ProtocolCore::create_xrc_tgt(uint32_t xrcd) {
  UROCE_ASSERT_HELD(*this);
  auto x = xrcds_.find(xrcd);
  if (x == xrcds_.end()) return make_error(EINVAL, "create_qp: unknown XRC domain");
  // Its work queues are never posted to: one slot each.
  auto qp = make_qp(PdHandle{}, QpType::XrcRecv, nullptr, nullptr, QpCap{1, 1, 1, 1, 0}, false, nullptr, std::nullopt);
  if (!qp) return qp;
  (*qp)->xrcd = xrcd;
  ++x->second;
  return qp;
}

verbs::Srq* ProtocolCore::xrc_srq(uint32_t srqn, uint32_t xrcd) const {
  auto it = srqs_.find(srqn);
  return it != srqs_.end() && xrcd && it->second->xrcd == xrcd ? it->second.get() : nullptr;
}

}  // namespace uroce::transport

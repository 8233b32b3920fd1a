// Multicast (IBA 10.5): UD QPs attach to groups named by a multicast GID; a packet sent to a
// group (DQPN 0xFFFFFF) is delivered to every QP attached to it here, the sender's own
// included (as a NIC does unless told to block its own loopback), each checking its Q_Key.
// Nothing else is honoured on a group address: a connected opcode, another DQPN, a group no
// QP joined.
#include <algorithm>
#include <cerrno>

#include "transport/protocol_core.hpp"
#include "transport/roles.hpp"

namespace uroce::transport {

const ProtocolCore::McastGroup* ProtocolCore::group_for(const Gid& gid) const {
  for (const McastGroup& g : mcast_)
    if (g.gid == gid) return &g;
  return nullptr;
}

Result<bool> ProtocolCore::attach_mcast(Qp& qp, const Gid& group) {
  UROCE_ASSERT_HELD(*this);
  if (qp.type() != QpType::UD) return make_error(EINVAL, "attach_mcast: only UD queue pairs join groups");
  if (!wire::is_multicast(group)) return make_error(EINVAL, "attach_mcast: " + group.to_string() + " is no multicast GID");
  auto it = std::find_if(mcast_.begin(), mcast_.end(), [&](const McastGroup& g) { return g.gid == group; });
  if (it != mcast_.end() && std::find(it->qps.begin(), it->qps.end(), &qp) != it->qps.end()) return false;
  size_t total = 0;
  for (const McastGroup& g : mcast_) total += g.qps.size();
  if (total >= limits_.max_total_mcast_qp_attach) return make_error(ENOMEM, "attach_mcast: too many attachments");
  if (it == mcast_.end()) {
    if (mcast_.size() >= limits_.max_mcast_grp) return make_error(ENOMEM, "attach_mcast: too many multicast groups");
    mcast_.push_back({group, {&qp}});
    return true;
  }
  if (it->qps.size() >= limits_.max_mcast_qp_attach)
    return make_error(ENOMEM, "attach_mcast: too many queue pairs in the group");
  it->qps.push_back(&qp);
  return false;
}

Result<bool> ProtocolCore::detach_mcast(Qp& qp, const Gid& group) {
  UROCE_ASSERT_HELD(*this);
  auto it = std::find_if(mcast_.begin(), mcast_.end(), [&](const McastGroup& g) { return g.gid == group; });
  auto at = it == mcast_.end() ? decltype(it->qps.begin()){} : std::find(it->qps.begin(), it->qps.end(), &qp);
  if (it == mcast_.end() || at == it->qps.end())
    return make_error(EINVAL, "detach_mcast: the queue pair is not attached to " + group.to_string());
  it->qps.erase(at);
  if (!it->qps.empty()) return false;
  mcast_.erase(it);
  return true;
}

std::vector<Gid> ProtocolCore::groups_of(const Qp& qp) const {
  std::vector<Gid> out;
  for (const McastGroup& g : mcast_)
    if (std::find(g.qps.begin(), g.qps.end(), &qp) != g.qps.end()) out.push_back(g.gid);
  return out;
}

void ProtocolCore::receive_multicast(const McastGroup& group, std::span<const uint8_t> buf,
                                     const wire::FlowAddr& from, const wire::Ipv4Fields& ip) {
  wire::Packet p;
  if (wire::decode(buf, p) != wire::ParseError::None) {
    ++ctr_.rx_malformed;
    return;
  }
  if (p.bth.dest_qp != wire::kMulticastQpn) {  // a group's packets name no QP of their own
    ++ctr_.rx_unknown_qp;
    return;
  }
  if ((p.bth.pkey & 0x7fff) != 0x7fff) {
    ++ctr_.rx_bad_pkey;
    return;
  }
  if (p.info().transport != wire::Transport::UD) {  // only datagrams are sent to groups
    ++ctr_.rx_bad_opcode;
    return;
  }
  ++ctr_.rx_mcast;
  Context cx(*this);
  for (Qp* q : group.qps) {
    QpState s = q->state();
    if (s != QpState::Rtr && s != QpState::Rts && s != QpState::Sqd) {
      ++ctr_.rx_wrong_state;
      continue;
    }
    count_rx(*q, buf.size());
    responder_on_datagram(cx, *q, p, from, ip);
  }
}

}  // namespace uroce::transport

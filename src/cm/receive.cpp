// The manager's receive side and timers: each received MAD is checked, matched to its
// connection by communication ID (or to a listener by service ID), and answered.
#include "cm/manager.hpp"

namespace uroce::cm {

void Manager::on_mad(std::span<const uint8_t> mad, const Gid& from, uint64_t now) {
  auto h = read_header(mad);
  if (!h || h->base_version != 1 || h->mgmt_class != kMgmtClassCm || h->class_version != kCmClassVersion ||
      h->method != kMethodSend) {
    ++ctr_.dropped;
    return;
  }
  ++ctr_.mads_in;
  ConstMadData d(mad.data() + kMadHeaderBytes, kMadDataBytes);
  switch (CmAttr(h->attr_id)) {
    case CmAttr::Req: {
      Req r = decode_req(d);
      r.ece_options = h->attr_mod;
      return on_req(*h, std::move(r), from, now);
    }
    case CmAttr::Rep: {
      Rep r = decode_rep(d);
      r.ece_options = h->attr_mod;
      return on_rep(r, from);
    }
    case CmAttr::Rtu: return on_rtu(decode_rtu(d));
    case CmAttr::Rej: return on_rej(decode_rej(d));
    case CmAttr::Mra: return on_mra(decode_mra(d), now);
    case CmAttr::Dreq: return on_dreq(*h, decode_dreq(d), from);
    case CmAttr::Drep: return on_drep(decode_drep(d));
    case CmAttr::SidrReq: return on_sidr_req(*h, decode_sidr_req(d), from);
    case CmAttr::SidrRep: return on_sidr_rep(decode_sidr_rep(d));
    case CmAttr::ClassPortInfo:
    case CmAttr::Lap:  // no alternate paths on RoCE
    case CmAttr::Apr:
      break;
  }
  ++ctr_.dropped;
}

void Manager::on_req(const MadHeader& h, const Req& r, const Gid& from, uint64_t) {
  if (auto dup = by_remote_.find({r.local_comm_id, from}); dup != by_remote_.end()) {
    Conn& c = conns_.at(dup->second);
    ++ctr_.duplicates;
    if (c.state == State::RepSent) emit(c.peer, c.last);  // our REP was lost
    return;
  }
  // A REQ we refuse without a connection: the REJ names only the peer's communication ID.
  auto refuse = [&](RejReason why) {
    Rej rej;
    rej.remote_comm_id = r.local_comm_id;
    rej.rejected = MsgRef::Req;
    rej.reason = uint16_t(why);
    emit(from, make_mad(CmAttr::Rej, h.tid, rej), true);
  };
  auto l = listeners_.find(r.service_id);
  if (l == listeners_.end()) return refuse(RejReason::InvalidServiceId);  // rdma_cm: "connection refused"
  // The consumer is behind, or this source holds its share: refuse rather than grow.
  if (pending_ >= cfg_.max_pending || over_share(from)) {
    ++ctr_.refused;
    return refuse(RejReason::NoResources);
  }
  CommId id = fresh_id();
  Conn& c = conns_[id];
  ++pending_;
  c.state = State::ReqReceived;
  c.peer = from;
  c.remote_id = r.local_comm_id;
  c.remote_qpn = r.local_qpn;
  c.tid = h.tid;
  hold(from);
  by_remote_[{c.remote_id, from}] = id;
  Event e{EventType::ReqReceived, id, l->second, from};
  e.req = r;
  events_.push_back(std::move(e));
}

void Manager::on_rep(const Rep& r, const Gid& from) {
  auto it = conns_.find(r.remote_comm_id);
  if (it == conns_.end() || it->second.peer != from) {
    ++ctr_.dropped;
    return;
  }
  Conn& c = it->second;
  if (c.state == State::Established && r.local_comm_id == c.remote_id) {  // our RTU was lost
    ++ctr_.duplicates;
    emit(c.peer, c.last);
    return;
  }
  if (c.state != State::ReqSent) {
    ++ctr_.duplicates;
    return;
  }
  c.state = State::RepReceived;
  c.remote_id = r.local_comm_id;
  c.remote_qpn = r.local_qpn;
  c.deadline = 0;
  by_remote_[{c.remote_id, c.peer}] = it->first;
  Event e{EventType::RepReceived, it->first, 0, c.peer};
  e.rep = r;
  events_.push_back(std::move(e));
}

void Manager::on_rtu(const Rtu& r) {
  Conn* c = find(r.remote_comm_id, State::RepSent);
  if (!c || c->remote_id != r.local_comm_id) {
    ++ctr_.duplicates;
    return;
  }
  c->state = State::Established;
  c->deadline = 0;
  Event e{EventType::Established, r.remote_comm_id, 0, c->peer};
  e.private_data = r.private_data;
  events_.push_back(std::move(e));
}

void Manager::on_rej(const Rej& r) {
  auto it = conns_.find(r.remote_comm_id);
  if (it == conns_.end() || (it->second.state != State::ReqSent && it->second.state != State::RepSent)) {
    ++ctr_.dropped;
    return;
  }
  Event e{EventType::Rejected, it->first, 0, it->second.peer};
  e.rej = r;
  events_.push_back(std::move(e));
  forget(it->first);
}

// The peer needs more time before it answers: wait that long before retrying (IBA 12.6.6).
void Manager::on_mra(const Mra& r, uint64_t now) {
  auto it = conns_.find(r.remote_comm_id);
  if (it == conns_.end() || !it->second.deadline) {
    ++ctr_.dropped;
    return;
  }
  it->second.deadline = now + cm_timeout_ns(r.service_timeout) + retry_interval();
}

void Manager::on_dreq(const MadHeader& h, const Dreq& r, const Gid& from) {
  auto it = conns_.find(r.remote_comm_id);
  bool ours = it != conns_.end() && it->second.peer == from && it->second.remote_id == r.local_comm_id;
  // Unknown DREQs are answered too: a retransmitted DREQ whose DREP was lost finds nothing here.
  emit(from, make_mad(CmAttr::Drep, h.tid, Drep{r.remote_comm_id, r.local_comm_id, {}}), !ours);
  if (!ours) {
    ++ctr_.duplicates;
    return;
  }
  Event e{it->second.state == State::DreqSent ? EventType::Disconnected : EventType::DreqReceived, it->first, 0, from};
  e.private_data = r.private_data;
  events_.push_back(std::move(e));
  forget(it->first);
}

void Manager::on_drep(const Drep& r) {
  Conn* c = find(r.remote_comm_id, State::DreqSent);
  if (!c || c->remote_id != r.local_comm_id) {
    ++ctr_.duplicates;
    return;
  }
  Event e{EventType::Disconnected, r.remote_comm_id, 0, c->peer};
  e.private_data = r.private_data;
  events_.push_back(std::move(e));
  forget(r.remote_comm_id);
}

void Manager::on_sidr_req(const MadHeader& h, const SidrReq& r, const Gid& from) {
  auto refuse = [&](SidrStatus why) {
    SidrRep rep;
    rep.request_id = r.request_id;
    rep.status = why;
    rep.service_id = r.service_id;
    emit(from, make_mad(CmAttr::SidrRep, h.tid, rep), true);
  };
  // A copy of a request the consumer has not answered yet (the peer's retransmission, or a
  // flood of one MAD) is no new request; once answered, a copy is asked again.
  if (sidr_tid_.count({r.request_id, from})) {
    ++ctr_.duplicates;
    return;
  }
  auto l = listeners_.find(r.service_id);
  if (l == listeners_.end()) return refuse(SidrStatus::NoService);
  if (pending() >= cfg_.max_pending || over_share(from)) {
    ++ctr_.refused;
    return refuse(SidrStatus::Rejected);
  }
  sidr_tid_[{r.request_id, from}] = h.tid;
  hold(from);
  Event e{EventType::SidrReqReceived, r.request_id, l->second, from};
  e.sidr_req = r;
  events_.push_back(std::move(e));
}

void Manager::on_sidr_rep(const SidrRep& r) {
  auto it = sidr_.find(r.request_id);
  if (it == sidr_.end()) {
    ++ctr_.duplicates;
    return;
  }
  Event e{EventType::SidrRepReceived, r.request_id, 0, it->second.peer};
  e.sidr_rep = r;
  events_.push_back(std::move(e));
  sidr_.erase(it);
}

void Manager::on_timer(uint64_t now) {
  std::vector<CommId> gone;
  for (auto& [id, c] : conns_) {
    if (!c.deadline || c.deadline > now || retry(c, now)) continue;
    events_.push_back({c.state == State::DreqSent ? EventType::Disconnected : EventType::Unreachable, id, 0, c.peer});
    gone.push_back(id);
  }
  for (CommId id : gone) forget(id);
  for (auto it = sidr_.begin(); it != sidr_.end();) {
    if (it->second.deadline > now || retry(it->second, now)) {
      ++it;
      continue;
    }
    events_.push_back({EventType::Unreachable, it->first, 0, it->second.peer});
    it = sidr_.erase(it);
  }
}

uint64_t Manager::next_deadline() const {
  uint64_t d = UINT64_MAX;
  for (auto& [id, c] : conns_)
    if (c.deadline) d = std::min(d, c.deadline);
  for (auto& [id, s] : sidr_) d = std::min(d, s.deadline);
  return d;
}

}  // namespace uroce::cm

#include "cm/manager.hpp"

#include <cerrno>

namespace uroce::cm {

uint64_t cm_timeout_ns(uint8_t code) { return 4096ull << (code & 31); }

const char* to_string(EventType t) {
  switch (t) {
    case EventType::ReqReceived: return "REQ received";
    case EventType::RepReceived: return "REP received";
    case EventType::Established: return "established";
    case EventType::Rejected: return "rejected";
    case EventType::Unreachable: return "unreachable";
    case EventType::DreqReceived: return "DREQ received";
    case EventType::Disconnected: return "disconnected";
    case EventType::SidrReqReceived: return "SIDR_REQ received";
    case EventType::SidrRepReceived: return "SIDR_REP received";
  }
  return "?";
}

Manager::Manager(ManagerConfig cfg) : cfg_(cfg), rng_(cfg.seed ? cfg.seed : std::random_device{}()) {
  next_tid_ = rng_() & 0xffffffffull;  // the upper half stays free, as the kernel keeps it for agents
}

Status Manager::listen(uint64_t service_id, uint64_t cookie) {
  if (!listeners_.emplace(service_id, cookie).second) return make_error(EADDRINUSE, "cm: the service is already listened on");
  return {};
}

void Manager::unlisten(uint64_t service_id) { listeners_.erase(service_id); }

CommId Manager::fresh_id() {
  for (;;) {
    auto id = CommId(rng_());
    if (cfg_.id_high_bits) id = (id >> cfg_.id_high_bits) | cfg_.id_high << (32 - cfg_.id_high_bits);
    if (id != 0 && !conns_.count(id) && !sidr_.count(id)) return id;
  }
}

uint64_t Manager::retry_interval() const { return cm_timeout_ns(cfg_.response_timeout); }

void Manager::emit(const Gid& to, const Mad& mad, bool best_effort) {
  out_.push_back({to, mad, best_effort});
  ++ctr_.mads_out;
}

void Manager::release(const Gid& from) {
  auto it = pending_from_.find(from);
  if (it != pending_from_.end() && --it->second == 0) pending_from_.erase(it);
}

bool Manager::over_share(const Gid& from) const {
  auto it = pending_from_.find(from);
  return it != pending_from_.end() && it->second >= cfg_.max_pending_per_source;
}

Manager::Conn* Manager::find(CommId id, State s) {
  auto it = conns_.find(id);
  return it != conns_.end() && it->second.state == s ? &it->second : nullptr;
}

void Manager::send_kept(Outstanding& o, const Mad& mad, uint64_t now) {
  emit(o.peer, mad);
  o.last = mad;
  o.deadline = now + retry_interval();
  o.retries_left = cfg_.max_retries;
}

bool Manager::retry(Outstanding& o, uint64_t now) {
  if (!o.retries_left) return false;
  --o.retries_left;
  ++ctr_.retransmits;
  o.deadline = now + retry_interval();
  emit(o.peer, o.last);
  return true;
}

Result<CommId> Manager::connect(const Gid& peer, Req req, uint64_t now) {
  if (req.private_data.size() > kReqPrivate) return make_error(EINVAL, "cm: REQ private data is at most 92 bytes");
  CommId id = fresh_id();
  req.local_comm_id = id;
  req.local_ca_guid = cfg_.ca_guid;
  req.local_cm_response_timeout = req.remote_cm_response_timeout = cfg_.response_timeout;
  req.max_cm_retries = cfg_.max_retries;
  Conn& c = conns_[id];
  c.state = State::ReqSent;
  c.peer = peer;
  c.tid = next_tid_++;
  send_kept(c, make_mad(CmAttr::Req, c.tid, req, req.ece_options), now);
  return id;
}

Status Manager::accept(CommId id, Rep rep, uint64_t now) {
  Conn* c = find(id, State::ReqReceived);
  if (!c) return make_error(EINVAL, "cm: accept needs a connection request that was not yet answered");
  if (rep.private_data.size() > kRepPrivate) return make_error(EINVAL, "cm: REP private data is at most 196 bytes");
  rep.local_comm_id = id;
  rep.remote_comm_id = c->remote_id;
  rep.local_ca_guid = cfg_.ca_guid;
  c->state = State::RepSent;
  --pending_;
  release(c->peer);
  send_kept(*c, make_mad(CmAttr::Rep, c->tid, rep, rep.ece_options), now);
  return {};
}

Status Manager::reject(CommId id, uint16_t reason, std::vector<uint8_t> private_data, uint64_t) {
  auto it = conns_.find(id);
  if (it == conns_.end() || (it->second.state != State::ReqReceived && it->second.state != State::RepReceived))
    return make_error(EINVAL, "cm: reject needs an unanswered REQ or REP");
  if (private_data.size() > kRejPrivate) return make_error(EINVAL, "cm: REJ private data is at most 148 bytes");
  Conn& c = it->second;
  Rej rej;
  rej.local_comm_id = id;
  rej.remote_comm_id = c.remote_id;
  rej.rejected = c.state == State::ReqReceived ? MsgRef::Req : MsgRef::Rep;
  rej.reason = reason;
  rej.private_data = std::move(private_data);
  emit(c.peer, make_mad(CmAttr::Rej, c.tid, rej));
  forget(id);
  return {};
}

Status Manager::establish(CommId id, std::vector<uint8_t> private_data, uint64_t) {
  Conn* c = find(id, State::RepReceived);
  if (!c) return make_error(EINVAL, "cm: establish needs a received REP");
  if (private_data.size() > kRtuPrivate) return make_error(EINVAL, "cm: RTU private data is at most 224 bytes");
  c->state = State::Established;
  c->last = make_mad(CmAttr::Rtu, c->tid, Rtu{id, c->remote_id, std::move(private_data)});  // again for a repeated REP
  c->deadline = 0;
  emit(c->peer, c->last);
  events_.push_back({EventType::Established, id, 0, c->peer});
  return {};
}

Status Manager::disconnect(CommId id, std::vector<uint8_t> private_data, uint64_t now) {
  auto it = conns_.find(id);
  if (it == conns_.end() || (it->second.state != State::Established && it->second.state != State::RepSent))
    return make_error(EINVAL, "cm: disconnect needs a connection");
  if (private_data.size() > kDreqPrivate) return make_error(EINVAL, "cm: DREQ private data is at most 220 bytes");
  Conn& c = it->second;
  c.state = State::DreqSent;
  c.tid = next_tid_++;
  send_kept(c, make_mad(CmAttr::Dreq, c.tid, Dreq{id, c.remote_id, c.remote_qpn, std::move(private_data)}), now);
  return {};
}

void Manager::forget(CommId id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  if (it->second.state == State::ReqReceived) {
    --pending_;
    release(it->second.peer);
  }
  by_remote_.erase({it->second.remote_id, it->second.peer});
  conns_.erase(it);
}

Result<CommId> Manager::sidr_request(const Gid& peer, SidrReq req, uint64_t now) {
  if (req.private_data.size() > kSidrReqPrivate) return make_error(EINVAL, "cm: SIDR_REQ private data is at most 216 bytes");
  CommId id = fresh_id();
  req.request_id = id;
  Sidr& s = sidr_[id];
  s.peer = peer;
  send_kept(s, make_mad(CmAttr::SidrReq, next_tid_++, req), now);
  return id;
}

Status Manager::sidr_reply(CommId request_id, const Gid& peer, SidrRep rep) {
  auto it = sidr_tid_.find({request_id, peer});
  if (it == sidr_tid_.end()) return make_error(EINVAL, "cm: no SIDR request to answer");
  if (rep.private_data.size() > kSidrRepPrivate) return make_error(EINVAL, "cm: SIDR_REP private data is at most 136 bytes");
  rep.request_id = request_id;
  emit(peer, make_mad(CmAttr::SidrRep, it->second, rep));
  sidr_tid_.erase(it);
  release(peer);
  return {};
}

}  // namespace uroce::cm

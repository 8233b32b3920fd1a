#include "transport/nic.hpp"

#include <algorithm>
#include <cstring>
#include <cerrno>
#include <mutex>
#include <random>
#include <string>

#include "transport/engines.hpp"
#include "wire/icrc.hpp"
#include "wire/packet.hpp"

namespace uroce::transport {

using core::Cq;
using core::Qp;
using wire::Psn;

namespace {
uint64_t seed_or_random(uint64_t s) {
  if (s) return s;
  std::random_device rd;
  return uint64_t(rd()) << 32 | rd();
}
constexpr uint32_t kPoolBlock = 256;
}  // namespace

Nic::Nic(NicConfig cfg)
    : cfg_(std::move(cfg)), mrs_(seed_or_random(cfg_.seed)), qpn_rng_(seed_or_random(cfg_.seed) ^ 0x9e3779b97f4a7c15ull) {
  if (!cfg_.src_port_for) cfg_.src_port_for = [](uint32_t qpn) { return uint16_t(0xc000 | (qpn & 0x3fff)); };
  raise({AsyncEventType::PortActive});  // the port is up as soon as the device exists
}

Nic::~Nic() = default;

// ---------------------------------------------------------------- control path

Result<uint32_t> Nic::alloc_pd() {
  if (pds_.size() >= limits_.max_pd) return make_error(ENOMEM, "alloc_pd: too many protection domains");
  uint32_t h = next_pd_++;
  pds_[h] = 0;
  return h;
}

Status Nic::dealloc_pd(uint32_t pd) {
  auto it = pds_.find(pd);
  if (it == pds_.end()) return make_error(EINVAL, "dealloc_pd: unknown protection domain");
  if (it->second) return make_error(EBUSY, "dealloc_pd: memory regions or QPs still use it");
  pds_.erase(it);
  return {};
}

Result<core::Mr> Nic::reg_mr(uint32_t pd, void* addr, uint64_t len, uint32_t access) {
  auto it = pds_.find(pd);
  if (it == pds_.end()) return make_error(EINVAL, "reg_mr: unknown protection domain");
  if (mrs_.size() >= limits_.max_mr) return make_error(ENOMEM, "reg_mr: too many memory regions");
  auto r = mrs_.reg(pd, reinterpret_cast<uint64_t>(addr), len, access);
  if (r) ++it->second;
  return r;
}

Status Nic::dereg_mr(uint32_t lkey) {
  const core::Mr* mr = mrs_.by_lkey(lkey);
  if (!mr) return make_error(EINVAL, "dereg_mr: unknown memory region");
  uint32_t pd = mr->pd;
  mrs_.dereg(lkey);  // keys are dead from here on: the engine checks every access under our lock
  --pds_[pd];
  return {};
}

Result<Cq*> Nic::create_cq(uint32_t depth) {
  if (depth == 0 || depth > limits_.max_cqe) return make_error(EINVAL, "create_cq: depth must be 1.." + std::to_string(limits_.max_cqe));
  uint32_t h = next_cq_++;
  auto cq = std::make_unique<Cq>(h, depth);
  Cq* p = cq.get();
  cqs_[h] = std::move(cq);
  cq_users_[p] = 0;
  return p;
}

Status Nic::destroy_cq(Cq* cq) {
  auto it = cq_users_.find(cq);
  if (it == cq_users_.end()) return make_error(EINVAL, "destroy_cq: unknown completion queue");
  if (it->second) return make_error(EBUSY, "destroy_cq: queue pairs still use it");
  std::erase(cq_events_, cq);
  cq_users_.erase(it);
  cqs_.erase(cq->handle());
  return {};
}

Result<Qp*> Nic::create_qp(uint32_t pd, QpType type, Cq* scq, Cq* rcq, const QpCap& cap, bool sig_all,
                           core::Srq* srq) {
  auto pit = pds_.find(pd);
  if (pit == pds_.end()) return make_error(EINVAL, "create_qp: unknown protection domain");
  if (!scq || !rcq || !cq_users_.count(scq) || !cq_users_.count(rcq))
    return make_error(EINVAL, "create_qp: send and receive completion queues are required");
  if (type != QpType::RC && type != QpType::UC && type != QpType::UD)
    return make_error(EOPNOTSUPP, "create_qp: RC, UC and UD queue pairs are supported");
  if (cap.max_send_wr == 0 || cap.max_send_wr > limits_.max_qp_wr || cap.max_recv_wr > limits_.max_qp_wr)
    return make_error(EINVAL, "create_qp: max_send_wr/max_recv_wr must be 1.." + std::to_string(limits_.max_qp_wr));
  if (cap.max_send_sge > limits_.max_sge || cap.max_recv_sge > limits_.max_sge)
    return make_error(EINVAL, "create_qp: at most " + std::to_string(limits_.max_sge) + " SGEs per WQE");
  if (cap.max_inline_data > limits_.max_inline)
    return make_error(EINVAL, "create_qp: max_inline_data larger than " + std::to_string(limits_.max_inline));
  if (qps_.size() >= limits_.max_qp) return make_error(ENOMEM, "create_qp: too many queue pairs");
  if (srq && (!srq_users_.count(srq) || srq->pd() != pd))
    return make_error(EINVAL, "create_qp: the SRQ is unknown or belongs to another protection domain");
  uint32_t qpn;
  do qpn = uint32_t(qpn_rng_()) & wire::kQpnMask;
  while (qpn < 0x10 || qps_.count(qpn));  // 0 and 1 are SMI/GSI; the rest of the first 16 is left free
  QpCap c = cap;
  if (srq) c.max_recv_wr = 1;  // receives come from the SRQ
  auto qp = std::make_unique<Qp>(qpn, type, pd, scq, rcq, c);
  qp->srq = srq;
  if (srq) ++srq_users_[srq];
  QpAttr a;
  a.sq_sig_all = sig_all;
  qp->flow.src = cfg_.gids.front();  // until an address vector names the source GID
  qp->flow.src_port = cfg_.src_port_for(qpn);
  qp->flow.dst_port = wire::kRoceV2Port;
  qp->set_sig_all(sig_all);
  Qp* p = qp.get();
  qps_[qpn] = std::move(qp);
  ++pit->second;
  ++cq_users_[scq];
  ++cq_users_[rcq];
  return p;
}

bool Nic::pd_busy(uint32_t pd) const {
  auto it = pds_.find(pd);
  return it != pds_.end() && it->second;
}

bool Nic::cq_busy(Cq* cq) const {
  auto it = cq_users_.find(cq);
  return it != cq_users_.end() && it->second;
}

bool Nic::srq_busy(core::Srq* srq) const {
  auto it = srq_users_.find(srq);
  return it != srq_users_.end() && it->second;
}

Status Nic::modify_qp(Qp& qp, const QpAttr& attr, uint32_t mask) {
  // As rxe: a path MTU above the port's active MTU is refused, not clamped.
  if ((mask & kQpPathMtu) && mtu_bytes(attr.path_mtu) > mtu_bytes(cfg_.port_mtu))
    return make_error(EINVAL, "modify_qp: path_mtu " + std::to_string(mtu_bytes(attr.path_mtu)) +
                                  " is above the port's active MTU " + std::to_string(mtu_bytes(cfg_.port_mtu)) +
                                  " (from the interface MTU)");
  if (mask & kQpAv) {  // the source address: the GID table entry the path names
    if (attr.sgid_index >= cfg_.gids.size())
      return make_error(EINVAL, "modify_qp: sgid_index " + std::to_string(attr.sgid_index) + " is past the GID table (" +
                                    std::to_string(cfg_.gids.size()) + " entries)");
    if (wire::is_v4(attr.dgid) != wire::is_v4(cfg_.gids[attr.sgid_index]))
      return make_error(EINVAL, "modify_qp: dgid and the source GID (sgid_index) are of different IP versions");
  }
  QpState before = qp.state();
  if (Status s = qp.modify(attr, mask); !s) return s;
  if (mask & kQpAv) qp.flow.src = cfg_.gids[attr.sgid_index];
  QpState after = qp.state();
  if (after == QpState::Reset && before != QpState::Reset) reset_qp(qp);
  if (after == QpState::Err && before != QpState::Err) qp_to_error(qp, /*fatal=*/false);
  if (after == QpState::Rts) schedule(qp);
  return {};
}

Status Nic::destroy_qp(Qp* qp) {
  auto it = qp ? qps_.find(qp->qpn()) : qps_.end();
  if (it == qps_.end() || it->second.get() != qp) return make_error(EINVAL, "destroy_qp: unknown queue pair");
  std::erase(run_list_, qp);
  std::erase(ack_list_, qp);
  --pds_[qp->pd()];
  --cq_users_[qp->send_cq];
  --cq_users_[qp->recv_cq];
  if (qp->srq) --srq_users_[qp->srq];
  qps_.erase(it);
  return {};
}

Result<core::Srq*> Nic::create_srq(uint32_t pd, uint32_t depth, uint32_t max_sge) {
  auto pit = pds_.find(pd);
  if (pit == pds_.end()) return make_error(EINVAL, "create_srq: unknown protection domain");
  if (depth == 0 || depth > limits_.max_qp_wr) return make_error(EINVAL, "create_srq: max_wr must be 1.." + std::to_string(limits_.max_qp_wr));
  if (max_sge == 0 || max_sge > limits_.max_sge) return make_error(EINVAL, "create_srq: max_sge must be 1.." + std::to_string(limits_.max_sge));
  auto srq = std::make_unique<core::Srq>(next_srq_++, pd, depth, max_sge);
  core::Srq* p = srq.get();
  srqs_[p->handle()] = std::move(srq);
  srq_users_[p] = 0;
  ++pit->second;
  return p;
}

Status Nic::destroy_srq(core::Srq* srq) {
  auto it = srq_users_.find(srq);
  if (it == srq_users_.end()) return make_error(EINVAL, "destroy_srq: unknown shared receive queue");
  if (it->second) return make_error(EBUSY, "destroy_srq: queue pairs still use it");
  --pds_[srq->pd()];
  srq_users_.erase(it);
  srqs_.erase(srq->handle());
  return {};
}

Status Nic::modify_srq(core::Srq& srq, uint32_t limit) {
  if (limit > srq.rq.capacity()) return make_error(EINVAL, "modify_srq: srq_limit larger than the queue");
  srq.limit.store(limit, std::memory_order_release);
  return {};
}

void Nic::raise(const AsyncEvent& e) {
  if (async_.size() >= 4096) async_.pop_front();  // nobody reads them: keep the newest
  async_.push_back(e);
  async_signal_ = true;
}

Result<AsyncEvent> Nic::get_async_event() {
  if (async_.empty()) return make_error(EAGAIN, "no async event pending");
  AsyncEvent e = async_.front();
  async_.pop_front();
  return e;
}

bool Nic::pop_recv(Qp& qp, core::RecvWqe& w, std::vector<Sge>& sges) {
  auto& rq = qp.srq ? qp.srq->rq : qp.rq;
  uint32_t idx = rq.done.load(std::memory_order_relaxed);
  if (idx == rq.prod.load(std::memory_order_acquire)) return false;
  w = rq.slot(idx);
  sges.assign(rq.sges(idx), rq.sges(idx) + w.num_sge);
  rq.done.store(idx + 1, std::memory_order_release);
  if (core::Srq* srq = qp.srq) {
    uint32_t limit = srq->limit.load(std::memory_order_acquire);
    if (limit && srq->posted() < limit && srq->limit.exchange(0) != 0) {
      AsyncEvent e{AsyncEventType::SrqLimitReached};
      e.srq_handle = srq->handle();
      raise(e);
    }
  }
  return true;
}

Qp* Nic::qp(uint32_t qpn) {
  auto it = qps_.find(qpn);
  return it == qps_.end() ? nullptr : it->second.get();
}

// ---------------------------------------------------------------- data path (application)

Result<uint32_t> Nic::check_send_wr(const Qp& qp, const SendWr& wr) const {
  constexpr uint32_t kKnown = kSendFence | kSendSignaled | kSendSolicited | kSendInline;
  if (wr.send_flags & ~kKnown) return make_error(EINVAL, "post_send: unknown send_flags");
  if (uint8_t(wr.opcode) > uint8_t(WrOpcode::AtomicFetchAdd)) return make_error(EINVAL, "post_send: unknown opcode");
  uint64_t total = 0;
  for (const Sge& s : wr.sg_list) total += s.length;
  if (total > limits_.max_msg) return make_error(EINVAL, "post_send: message longer than 2^31 bytes");
  bool atomic = wr.opcode == WrOpcode::AtomicCmpSwp || wr.opcode == WrOpcode::AtomicFetchAdd;
  if (qp.type() == QpType::UC && is_rd_atomic(wr.opcode))
    return make_error(EINVAL, "post_send: UC queue pairs support SEND and RDMA WRITE only");
  if (qp.type() == QpType::UD) {
    if (wr.opcode != WrOpcode::Send && wr.opcode != WrOpcode::SendWithImm)
      return make_error(EINVAL, "post_send: UD queue pairs support SEND only");
    if (!wr.ah) return make_error(EINVAL, "post_send: UD needs an address handle");
    if (wr.ah->sgid_index >= cfg_.gids.size() || wire::is_v4(wr.ah->dgid) != wire::is_v4(cfg_.gids[wr.ah->sgid_index]))
      return make_error(EINVAL, "post_send: the address handle's sgid_index names no GID of the destination's IP version");
    if (total > mtu_bytes(cfg_.port_mtu))
      return make_error(EINVAL, "post_send: a UD message fits in one packet of the port MTU (" +
                                    std::to_string(mtu_bytes(cfg_.port_mtu)) + " bytes)");
    if (wr.remote_qpn > wire::kQpnMask) return make_error(EINVAL, "post_send: remote_qpn > 24 bits");
  }
  if (wr.send_flags & kSendInline) {
    if (is_rd_atomic(wr.opcode))
      return make_error(EINVAL, "post_send: INLINE is only for SEND and RDMA WRITE");
    if (total > qp.sq.max_inline())
      return make_error(EINVAL, "post_send: inline data longer than max_inline_data (" +
                                    std::to_string(qp.sq.max_inline()) + ")");
  } else if (wr.sg_list.size() > qp.sq.max_sge()) {
    return make_error(EINVAL, "post_send: more SGEs than max_send_sge (" + std::to_string(qp.sq.max_sge()) + ")");
  }
  if (atomic) {
    if (wr.sg_list.size() != 1 || wr.sg_list[0].length != 8)
      return make_error(EINVAL, "post_send: atomics take exactly one 8-byte SGE");
    if (wr.remote_addr & 7) return make_error(EINVAL, "post_send: atomic remote_addr must be 8-byte aligned");
  }
  return uint32_t(total);
}

Status Nic::post_send(Qp& qp, std::span<const SendWr> wrs, size_t* bad) {
  QpState st = qp.state();
  if (st != QpState::Rts && st != QpState::Sqd && st != QpState::Err) {
    if (bad) *bad = 0;
    return make_error(EINVAL, std::string("post_send: QP is in ") + to_string(st) +
                                  "; the send queue takes work in RTS (or ERR, where it is flushed)");
  }
  auto& sq = qp.sq;
  Status result;
  {
    std::lock_guard g(sq.producer_lock);
    for (size_t i = 0; i < wrs.size(); ++i) {
      const SendWr& wr = wrs[i];
      Result<uint32_t> total = check_send_wr(qp, wr);
      if (total && sq.free_slots() == 0)
        total = make_error(ENOMEM, "post_send: send queue full (" + std::to_string(sq.capacity()) + " WQEs)");
      if (!total) {
        if (bad) *bad = i;
        result = total.error();
        break;
      }
      uint32_t idx = sq.prod_local;
      core::SendWqe& w = sq.slot(idx);
      w = core::SendWqe{};
      w.wr_id = wr.wr_id;
      w.opcode = wr.opcode;
      w.flags = wr.send_flags;
      w.imm = wr.imm_data;
      w.remote_addr = wr.remote_addr;
      w.rkey = wr.rkey;
      w.compare_add = wr.compare_add;
      w.swap = wr.swap;
      if (wr.ah) {
        w.ud_dgid = wr.ah->dgid;
        w.ud_sgid_index = wr.ah->sgid_index;
        w.ud_qpn = wr.remote_qpn;
        w.ud_qkey = wr.remote_qkey;
      }
      if (wr.send_flags & kSendInline) {
        uint8_t* dst = sq.inline_data(idx);
        for (const Sge& s : wr.sg_list) {
          std::memcpy(dst, reinterpret_cast<const void*>(s.addr), s.length);
          dst += s.length;
        }
        w.is_inline = true;
      } else {
        std::copy(wr.sg_list.begin(), wr.sg_list.end(), sq.sges(idx));
        w.num_sge = uint16_t(wr.sg_list.size());
      }
      w.length = *total;
      ++sq.prod_local;
    }
    sq.publish();
  }
  ring_doorbell(qp);
  return result;
}

Status Nic::post_recv_wrs(core::WorkQueue<core::RecvWqe>& rq, std::span<const RecvWr> wrs, size_t* bad) {
  std::lock_guard g(rq.producer_lock);
  Status result;
  for (size_t i = 0; i < wrs.size(); ++i) {
    const RecvWr& wr = wrs[i];
    Status s;
    if (wr.sg_list.size() > rq.max_sge())
      s = make_error(EINVAL, "post_recv: more SGEs than max_recv_sge (" + std::to_string(rq.max_sge()) + ")");
    else if (rq.free_slots() == 0)
      s = make_error(ENOMEM, "post_recv: receive queue full (" + std::to_string(rq.capacity()) + " WQEs)");
    if (!s) {
      if (bad) *bad = i;
      result = s;
      break;
    }
    uint32_t idx = rq.prod_local;
    core::RecvWqe& w = rq.slot(idx);
    w.wr_id = wr.wr_id;
    w.num_sge = uint16_t(wr.sg_list.size());
    uint64_t total = 0;
    Sge* dst = rq.sges(idx);
    for (size_t k = 0; k < wr.sg_list.size(); ++k) {
      dst[k] = wr.sg_list[k];
      total += wr.sg_list[k].length;
    }
    w.length = total > UINT32_MAX ? UINT32_MAX : uint32_t(total);
    ++rq.prod_local;
  }
  rq.publish();
  return result;
}

Status Nic::post_recv(Qp& qp, std::span<const RecvWr> wrs, size_t* bad) {
  QpState st = qp.state();
  if (st == QpState::Reset || qp.srq) {
    if (bad) *bad = 0;
    return make_error(EINVAL, qp.srq ? "post_recv: the QP takes its receives from an SRQ; post there"
                                     : "post_recv: QP is in RESET; move it to INIT first");
  }
  Status result = post_recv_wrs(qp.rq, wrs, bad);
  // Only a QP in ERR needs the engine for receives: to flush them.
  if (qp.state() == QpState::Err) ring_doorbell(qp);
  return result;
}

Status Nic::post_srq_recv(core::Srq& srq, std::span<const RecvWr> wrs, size_t* bad) {
  return post_recv_wrs(srq.rq, wrs, bad);
}

void Nic::ring_doorbell(Qp& qp) {
  if (!qp.doorbell.exchange(true, std::memory_order_acq_rel)) {
    {
      std::lock_guard g(doorbell_lock_);
      doorbells_.push_back(qp.qpn());
    }
    doorbell_count_.fetch_add(1, std::memory_order_seq_cst);
  }
  if (waker_) waker_();
}

// ---------------------------------------------------------------- engine side

void Nic::drain_doorbells() {
  doorbells_swap_.clear();
  {
    std::lock_guard g(doorbell_lock_);
    doorbells_swap_.swap(doorbells_);
  }
  doorbell_count_.fetch_sub(uint32_t(doorbells_swap_.size()), std::memory_order_seq_cst);
  for (uint32_t qpn : doorbells_swap_) {
    Qp* q = qp(qpn);
    if (!q) continue;
    q->doorbell.store(false, std::memory_order_release);
    if (q->state() == QpState::Err) q->flush_pending = true;
    schedule(*q);
  }
}

void Nic::schedule(Qp& qp) {
  if (!qp.active) {
    qp.active = true;
    run_list_.push_back(&qp);
  }
}

void Nic::want_ack(Qp& qp) {
  qp.resp.ack_pending = true;
  if (!qp.resp.in_ack_list) {
    qp.resp.in_ack_list = true;
    ack_list_.push_back(&qp);
  }
}

void Nic::arm_timer(Qp& qp, uint64_t deadline) {
  if (qp.timer_queued == 0 || deadline < qp.timer_queued) {
    qp.timer_queued = deadline;
    timers_.emplace(deadline, qp.qpn());
  }
}

void Nic::run_timers(uint64_t now) {
  while (!timers_.empty() && timers_.top().first <= now) {
    auto [when, qpn] = timers_.top();
    timers_.pop();
    Qp* q = qp(qpn);
    if (!q || q->timer_queued != when) continue;
    q->timer_queued = 0;
    if (q->req.rnr_until && q->req.rnr_until <= now) {
      q->req.rnr_until = 0;
      schedule(*q);
    }
    if (q->comp.retrans_deadline && q->comp.retrans_deadline <= now) completer_on_timer(*this, *q, now);
    uint64_t next = UINT64_MAX;
    if (q->req.rnr_until) next = std::min(next, q->req.rnr_until);
    if (q->comp.retrans_deadline) next = std::min(next, q->comp.retrans_deadline);
    if (next != UINT64_MAX) arm_timer(*q, next);
  }
}

uint64_t Nic::next_deadline() {
  while (!timers_.empty()) {
    auto [when, qpn] = timers_.top();
    Qp* q = qp(qpn);
    if (q && q->timer_queued == when) return when;
    timers_.pop();
  }
  return UINT64_MAX;
}

bool Nic::progress(uint64_t now) {
  bool did = false;
  if (doorbell_count_.load(std::memory_order_seq_cst)) {
    drain_doorbells();
    did = true;
  }
  run_timers(now);
  if (!run_list_.empty()) {
    did = true;
    run_list_swap_.clear();
    run_list_swap_.swap(run_list_);  // both keep their capacity: no allocation per pass
    for (Qp* q : run_list_swap_) q->active = false;
    for (Qp* q : run_list_swap_) {
      if (q->flush_pending) {
        flush(*q);
        continue;
      }
      uint32_t budget = cfg_.budget_per_qp;
      bool more = responder_run(*this, *q, budget);
      more |= requester_run(*this, *q, now, budget);
      if (more) schedule(*q);
    }
  }
  if (!ack_list_.empty()) {
    did = true;
    for (size_t i = 0; i < ack_list_.size(); ++i) responder_flush_ack(*this, *ack_list_[i]);
    // responder_flush_ack keeps a QP listed while its ACK must wait behind responses.
    std::erase_if(ack_list_, [](Qp* q) { return !q->resp.in_ack_list; });
  }
  return did || !tx_.empty();
}

wire::Ipv4Fields Nic::on_packet(std::span<const uint8_t> buf, const wire::FlowAddr& from, uint64_t now,
                                wire::Ipv4Fields ip) {
  ++ctr_.rx_packets;
  ctr_.rx_bytes += buf.size();
  if (buf.size() < wire::kBthLen + wire::kIcrcLen) {  // empty datagrams included
    ++ctr_.rx_runt;
    return ip;
  }
  if (!is_local(from.dst)) {  // not ours, whatever QPN it names
    ++ctr_.rx_bad_dest;
    return ip;
  }
  switch (wire::icrc_check(from, buf, ip)) {
    case wire::IcrcMatch::Bad: ++ctr_.rx_bad_icrc; return ip;
    case wire::IcrcMatch::Seen: ++ctr_.rx_icrc_ip_seen; break;
    case wire::IcrcMatch::Assumed: ++ctr_.rx_icrc_ip_assumed; break;
    case wire::IcrcMatch::Solved: ++ctr_.rx_icrc_ip_solved; break;
  }
  receive(buf, from, now, ip);
  return ip;
}

void Nic::receive(std::span<const uint8_t> buf, const wire::FlowAddr& from, uint64_t now, const wire::Ipv4Fields& ip) {
  wire::Packet p;
  if (wire::decode(buf, p) != wire::ParseError::None) {
    ++ctr_.rx_malformed;
    return;
  }
  Qp* q = qp(p.bth.dest_qp);
  if (!q) {
    ++ctr_.rx_unknown_qp;
    return;
  }
  if ((p.bth.pkey & 0x7fff) != 0x7fff) {  // we hold only the default partition
    ++ctr_.rx_bad_pkey;
    return;
  }
  const wire::OpcodeInfo& info = p.info();
  bool match = (info.transport == wire::Transport::RC && q->type() == QpType::RC) ||
               (info.transport == wire::Transport::UC && q->type() == QpType::UC) ||
               (info.transport == wire::Transport::UD && q->type() == QpType::UD);
  if (!match) {
    ++ctr_.rx_bad_opcode;
    return;
  }
  if (q->type() == QpType::UD) {  // datagrams come from anyone
    QpState s = q->state();
    if (s != QpState::Rtr && s != QpState::Rts && s != QpState::Sqd) {
      ++ctr_.rx_wrong_state;
      return;
    }
    responder_on_datagram(*this, *q, p, from, ip);
    return;
  }
  if (from.src != q->flow.dst || from.dst != q->flow.src) {
    ++ctr_.rx_bad_source;
    return;
  }
  QpState st = q->state();
  if (info.flags & wire::kRequest) {
    if (st != QpState::Rtr && st != QpState::Rts && st != QpState::Sqd) {
      ++ctr_.rx_wrong_state;
      return;
    }
    responder_on_request(*this, *q, p, now);
  } else {
    if (st != QpState::Rts && st != QpState::Sqd) {
      ++ctr_.rx_wrong_state;
      return;
    }
    completer_on_response(*this, *q, p, now);
  }
}

// ---------------------------------------------------------------- shared helpers

TxPacket* Nic::alloc_tx() {
  if (pool_.empty()) {
    if (pool_blocks_.size() * kPoolBlock >= cfg_.tx_pool) {
      ++ctr_.tx_pool_exhausted;
      return nullptr;
    }
    pool_blocks_.emplace_back(new TxPacket[kPoolBlock]);
    for (uint32_t i = 0; i < kPoolBlock; ++i) pool_.push_back(&pool_blocks_.back()[i]);
  }
  TxPacket* p = pool_.back();
  pool_.pop_back();
  return p;
}

void Nic::emit(TxPacket* p, size_t ib_len) {
  uint32_t crc = wire::icrc_for_flow(p->flow, std::span<const uint8_t>(p->data, ib_len));
  wire::icrc_store(p->data + ib_len, crc);
  p->len = uint32_t(ib_len + wire::kIcrcLen);
  ++ctr_.tx_packets;
  ctr_.tx_bytes += p->len;
  tx_.push_back(p);
}

void Nic::push_wc(Cq* cq, const Wc& wc) {
  bool was_overrun = cq->overrun();
  if (!cq->push(wc)) {
    ++ctr_.cq_overruns;
    if (!was_overrun) {  // reported once per CQ
      AsyncEvent e{AsyncEventType::CqErr};
      e.cq_handle = cq->handle();
      raise(e);
    }
    return;
  }
  if (cq->take_event_for(wc)) cq_events_.push_back(cq);
}

static WcOpcode wc_opcode(WrOpcode op) {
  switch (op) {
    case WrOpcode::Send:
    case WrOpcode::SendWithImm: return WcOpcode::Send;
    case WrOpcode::RdmaWrite:
    case WrOpcode::RdmaWriteWithImm: return WcOpcode::RdmaWrite;
    case WrOpcode::RdmaRead: return WcOpcode::RdmaRead;
    case WrOpcode::AtomicCmpSwp: return WcOpcode::CompSwap;
    case WrOpcode::AtomicFetchAdd: return WcOpcode::FetchAdd;
  }
  return WcOpcode::Send;
}

void Nic::complete_send(Qp& qp, core::SendWqe& w, WcStatus st) {
  bool rd_atomic = w.opcode == WrOpcode::RdmaRead || w.opcode == WrOpcode::AtomicCmpSwp ||
                   w.opcode == WrOpcode::AtomicFetchAdd;
  if (rd_atomic && w.assigned && qp.req.rd_atomic_out) --qp.req.rd_atomic_out;
  bool report = qp.sig_all() || (w.flags & kSendSignaled) || st != WcStatus::Success;
  Wc wc;
  if (report) {
    wc.wr_id = w.wr_id;
    wc.status = st;
    wc.opcode = wc_opcode(w.opcode);
    wc.byte_len = st == WcStatus::Success ? w.length : 0;
    wc.qp_num = qp.qpn();
  }
  uint32_t d = qp.sq.done.load(std::memory_order_relaxed);
  if (qp.req.next == d) {  // never let the requester point at a freed slot
    qp.req.next = d + 1;
    qp.req.pkt = 0;
  }
  // Free the slot before the completion is visible: a program that polls it may post at once
  // and must find the room it was promised.
  qp.sq.done.store(d + 1, std::memory_order_release);
  if (report) push_wc(qp.send_cq, wc);
}

void Nic::qp_to_error(Qp& qp, bool fatal) {
  if (fatal) {
    AsyncEvent e{AsyncEventType::QpFatal};
    e.qp_num = qp.qpn();
    raise(e);
  }
  qp.set_state(QpState::Err);
  qp.flush_pending = true;
  qp.comp.retrans_deadline = 0;
  qp.req.rnr_until = 0;
  schedule(qp);
}

void Nic::flush(Qp& qp) {
  qp.flush_pending = false;
  auto& sq = qp.sq;
  uint32_t prod = sq.prod.load(std::memory_order_acquire);
  while (sq.done.load(std::memory_order_relaxed) != prod)
    complete_send(qp, sq.slot(sq.done.load(std::memory_order_relaxed)), WcStatus::WrFlushErr);
  qp.req.next = prod;
  qp.req.pkt = 0;
  qp.req.rd_atomic_out = 0;
  Wc wc;
  wc.status = WcStatus::WrFlushErr;
  wc.opcode = WcOpcode::Recv;
  wc.qp_num = qp.qpn();
  if (qp.resp.have_recv) {
    wc.wr_id = qp.resp.recv_wr_id;
    qp.resp.have_recv = false;
    push_wc(qp.recv_cq, wc);
  }
  if (qp.srq) {
    // The SRQ's WQEs belong to its other QPs too: nothing more is flushed (IBA 11.6.3).
    AsyncEvent e{AsyncEventType::QpLastWqeReached};
    e.qp_num = qp.qpn();
    raise(e);
  } else {
    auto& rq = qp.rq;
    uint32_t rprod = rq.prod.load(std::memory_order_acquire);
    for (uint32_t i = rq.done.load(std::memory_order_relaxed); i != rprod; ++i) {
      wc.wr_id = rq.slot(i).wr_id;
      push_wc(qp.recv_cq, wc);
      rq.done.store(i + 1, std::memory_order_release);
    }
  }
  qp.resp.jobs.clear();
  qp.resp.msg = core::RespMsg::None;
}

void Nic::reset_qp(Qp& qp) {
  {
    std::lock_guard g(qp.sq.producer_lock);
    qp.sq.prod_local = 0;
    qp.sq.prod.store(0);
    qp.sq.done.store(0);
  }
  {
    std::lock_guard g(qp.rq.producer_lock);
    qp.rq.prod_local = 0;
    qp.rq.prod.store(0);
    qp.rq.done.store(0);
  }
  qp.req = core::RequesterState{};
  qp.comp = core::CompleterState{};
  size_t resources = qp.resp.resources.size();
  qp.resp = core::ResponderState{};
  qp.resp.resources.assign(resources, core::RdAtomicResource{});
  qp.flush_pending = false;
  qp.timer_queued = 0;
  std::erase(ack_list_, &qp);
}

}  // namespace uroce::transport

// The protocol core's object tables: PDs, MRs, CQs, QPs, SRQs and async events (the control
// path; the engine lock is held). Posting is in post.cpp, scheduling in schedule.cpp, receive
// dispatch and transmit buffers in packets.cpp, completions and QP lifecycle in completion.cpp.
#include "transport/protocol_core.hpp"

#include <algorithm>
#include <cstring>
#include <cerrno>
#include <mutex>
#include <random>
#include <string>

#include "transport/roles.hpp"
#include "transport/tag_matching.hpp"
#include "verbs/region_access.hpp"
#include "wire/icrc.hpp"
#include "wire/packet.hpp"

namespace uroce::transport {

using verbs::Cq;

namespace {
uint64_t seed_or_random(uint64_t s) {
  if (s) return s;
  std::random_device rd;
  return uint64_t(rd()) << 32 | rd();
}
}  // namespace

ProtocolCore::ProtocolCore(CoreConfig cfg)
    : cfg_(std::move(cfg)),
      mrs_(seed_or_random(cfg_.seed)),
      qpn_rng_(seed_or_random(cfg_.seed) ^ 0x9e3779b97f4a7c15ull),
      pool_(cfg_.tx_pool) {
  if (!cfg_.src_port_for) cfg_.src_port_for = wire::entropy_port;
  sched_.configure(cfg_.qos, cfg_.budget_per_qp * 4096);
  sched_.share_port(cfg_.shared_port, cfg_.shared_port_slot);
  raise({AsyncEventType::PortActive});  // the port is up as soon as the device exists
}

ProtocolCore::~ProtocolCore() = default;

// ---------------------------------------------------------------- control path

Result<PdHandle> ProtocolCore::alloc_pd() {
  UROCE_ASSERT_HELD(*this);
  if (pds_.size() >= limits_.max_pd) return make_error(ENOMEM, "alloc_pd: too many protection domains");
  PdHandle h(next_pd_++);
  pds_[h] = 0;
  return h;
}

Status ProtocolCore::dealloc_pd(PdHandle pd) {
  UROCE_ASSERT_HELD(*this);
  auto it = pds_.find(pd);
  if (it == pds_.end()) return make_error(EINVAL, "dealloc_pd: unknown protection domain");
  if (it->second) return make_error(EBUSY, "dealloc_pd: memory regions or QPs still use it");
  pds_.erase(it);
  return {};
}

Result<verbs::Mr> ProtocolCore::reg_mr(PdHandle pd, void* addr, uint64_t len, uint32_t access,
                                       std::optional<uint64_t> iova) {
  UROCE_ASSERT_HELD(*this);
  auto it = pds_.find(pd);
  if (it == pds_.end()) return make_error(EINVAL, "reg_mr: unknown protection domain");
  if (mrs_.size() >= limits_.max_mr) return make_error(ENOMEM, "reg_mr: too many memory regions");
  const uint64_t host = reinterpret_cast<uint64_t>(addr);
  auto r = mrs_.reg(pd, host, len, access, iova.value_or(host));
  if (r) ++it->second;
  return r;
}

Result<verbs::Mr> ProtocolCore::rereg_mr(Lkey lkey, PdHandle pd, void* addr, uint64_t len, uint32_t access,
                                         uint64_t iova) {
  UROCE_ASSERT_HELD(*this);
  const verbs::Mr* mr = mrs_.by_lkey(lkey);
  if (!mr) return make_error(EINVAL, "rereg_mr: unknown memory region");
  auto it = pds_.find(pd);
  if (it == pds_.end()) return make_error(EINVAL, "rereg_mr: unknown protection domain");
  const PdHandle old = mr->pd;
  auto r = mrs_.rereg(lkey, pd, reinterpret_cast<uint64_t>(addr), len, access, iova);
  if (r) {
    --pds_[old];  // the region now holds the new PD instead
    ++it->second;
  }
  return r;
}

Status ProtocolCore::dereg_mr(Lkey lkey) {
  UROCE_ASSERT_HELD(*this);
  const verbs::Mr* mr = mrs_.by_lkey(lkey);
  if (!mr) return make_error(EINVAL, "dereg_mr: unknown memory region");
  PdHandle pd = mr->pd;
  mrs_.dereg(lkey);  // keys are dead from here on: the engine checks every access under our lock
  --pds_[pd];
  return {};
}

Status ProtocolCore::prefetch(PdHandle pd, std::span<const Sge> sges, bool populate) {
  UROCE_ASSERT_HELD(*this);
  for (const Sge& s : sges) {
    uint8_t* host = nullptr;
    bool odp = false;
    if (mrs_.check_local(Lkey(s.lkey), pd, s.addr, s.length, 0, &host, &odp) != verbs::KeyCheck::Ok || !odp)
      return make_error(EINVAL, "advise_mr: an SGE outside the on-demand regions of this protection domain");
    constexpr uint64_t kPage = 4096;
    uint8_t byte;
    for (uint64_t at = 0; populate && at < s.length; at = (at + kPage) & ~(kPage - 1))
      if (!verbs::region_read(&byte, host + at, 1, true))
        return make_error(EFAULT, "advise_mr: memory of the region is not mapped");
  }
  return {};
}

Result<verbs::Mw> ProtocolCore::alloc_mw(PdHandle pd, uint8_t type) {
  UROCE_ASSERT_HELD(*this);
  auto it = pds_.find(pd);
  if (it == pds_.end()) return make_error(EINVAL, "alloc_mw: unknown protection domain");
  if (mrs_.mw_count() >= limits_.max_mr) return make_error(ENOMEM, "alloc_mw: too many memory windows");
  auto w = mrs_.alloc_mw(pd, type);
  if (w) ++it->second;
  return w;
}

Status ProtocolCore::dealloc_mw(uint32_t index) {
  UROCE_ASSERT_HELD(*this);
  const verbs::Mw* w = mrs_.mw(index);
  if (!w) return make_error(EINVAL, "dealloc_mw: unknown memory window");
  const PdHandle pd = w->pd;
  mrs_.dealloc_mw(index);  // unbound at once: its rkey stops working with the next packet
  --pds_[pd];
  return {};
}

Result<Cq*> ProtocolCore::create_cq(uint32_t depth) {
  UROCE_ASSERT_HELD(*this);
  if (depth == 0 || depth > limits_.max_cqe) return make_error(EINVAL, "create_cq: depth must be 1.." + std::to_string(limits_.max_cqe));
  uint32_t h = next_cq_++;
  auto cq = std::make_unique<Cq>(h, depth);
  Cq* p = cq.get();
  cqs_[h] = std::move(cq);
  cq_users_[p] = 0;
  return p;
}

Status ProtocolCore::resize_cq(Cq* cq, uint32_t depth) {
  UROCE_ASSERT_HELD(*this);
  if (!cq_users_.count(cq)) return make_error(EINVAL, "resize_cq: unknown completion queue");
  if (depth == 0 || depth > limits_.max_cqe) return make_error(EINVAL, "resize_cq: depth must be 1.." + std::to_string(limits_.max_cqe));
  if (!cq->resize(depth))
    return make_error(EINVAL, "resize_cq: " + std::to_string(cq->pending()) + " completions wait, more than " +
                                  std::to_string(depth));
  return {};
}

Status ProtocolCore::destroy_cq(Cq* cq) {
  UROCE_ASSERT_HELD(*this);
  auto it = cq_users_.find(cq);
  if (it == cq_users_.end()) return make_error(EINVAL, "destroy_cq: unknown completion queue");
  if (it->second) return make_error(EBUSY, "destroy_cq: queue pairs still use it");
  std::erase(cq_events_, cq);
  cq_users_.erase(it);
  cqs_.erase(cq->handle());
  return {};
}

Result<Qp*> ProtocolCore::create_qp(PdHandle pd, QpType type, Cq* scq, Cq* rcq, const QpCap& cap, bool sig_all,
                                    verbs::Srq* srq) {
  UROCE_ASSERT_HELD(*this);
  if (type == QpType::XrcRecv) return make_error(EINVAL, "create_qp: an XRC target QP is made in its XRC domain");
  if (type == QpType::XrcSend && (srq || cap.max_recv_wr))
    return make_error(EINVAL, "create_qp: an XRC initiator QP has no receive queue (max_recv_wr 0, no SRQ)");
  return make_qp(pd, type, scq, rcq, cap, sig_all, srq, std::nullopt);
}

Result<Qp*> ProtocolCore::create_gsi_qp(PdHandle pd, Cq* scq, Cq* rcq, const QpCap& cap) {
  UROCE_ASSERT_HELD(*this);
  if (qps_.count(Qpn(wire::kGsiQpn))) return make_error(EBUSY, "create_qp: the port already has its GSI QP (QP1)");
  return make_qp(pd, QpType::UD, scq, rcq, cap, false, nullptr, Qpn(wire::kGsiQpn));
}

Result<Qp*> ProtocolCore::make_qp(PdHandle pd, QpType type, Cq* scq, Cq* rcq, const QpCap& cap, bool sig_all,
                                  verbs::Srq* srq, std::optional<Qpn> fixed) {
  const bool tgt = type == QpType::XrcRecv;  // no PD and no CQ of its own (create_xrc_tgt)
  auto pit = pds_.find(pd);
  if (!tgt && pit == pds_.end()) return make_error(EINVAL, "create_qp: unknown protection domain");
  if (!tgt && (!scq || !rcq || !cq_users_.count(scq) || !cq_users_.count(rcq)))
    return make_error(EINVAL, "create_qp: send and receive completion queues are required");
  if (type != QpType::RC && type != QpType::UC && type != QpType::UD && type != QpType::XrcSend &&
      type != QpType::RawPacket && !tgt)
    return make_error(EOPNOTSUPP, "create_qp: RC, UC, UD, raw packet and XRC queue pairs are supported");
  if (cap.max_send_wr > limits_.max_qp_wr || cap.max_recv_wr > limits_.max_qp_wr)
    return make_error(EINVAL, "create_qp: max_send_wr/max_recv_wr must be 1.." + std::to_string(limits_.max_qp_wr));
  if (cap.max_send_sge > limits_.max_sge || cap.max_recv_sge > limits_.max_sge)
    return make_error(EINVAL, "create_qp: at most " + std::to_string(limits_.max_sge) + " SGEs per WQE");
  if (cap.max_inline_data > limits_.max_inline)
    return make_error(EINVAL, "create_qp: max_inline_data larger than " + std::to_string(limits_.max_inline));
  if (qps_.size() >= limits_.max_qp) return make_error(ENOMEM, "create_qp: too many queue pairs");
  if (srq && (!srq_users_.count(srq) || srq->pd() != pd))
    return make_error(EINVAL, "create_qp: the SRQ is unknown or belongs to another protection domain");
  if (srq && srq->xrcd)  // its receives are for its domain's target QPs alone
    return make_error(EINVAL, "create_qp: an XRC SRQ serves XRC target QPs only");
  if (srq && srq->wq) return make_error(EINVAL, "create_qp: a work queue serves RSS QPs only");
  if (srq && srq->tm && type != QpType::RC) return make_error(EINVAL, "create_qp: a tag matching SRQ serves RC QPs only");
  Qpn qpn = fixed.value_or(Qpn(0));
  // 0 and 1 are SMI/GSI; the rest of the first 16 is left free. On a shared host NIC, the
  // QPN's top bits are the process's steering slot.
  const uint32_t local_mask = wire::kQpnMask >> cfg_.qpn_high_bits;
  const uint32_t high = cfg_.qpn_high_bits ? cfg_.qpn_high << (24 - cfg_.qpn_high_bits) : 0;
  while (!fixed && (qpn.value() < 0x10 || qpn.value() == wire::kMulticastQpn || qps_.count(qpn)))
    qpn = Qpn(high | (uint32_t(qpn_rng_()) & local_mask));
  QpCap c = cap;
  if (srq) c.max_recv_wr = 1;  // receives come from the SRQ
  if (srq && srq->tm) {
    // Its rendezvous READs and FINs take send queue slots beside the program's, and its
    // messages complete to the SRQ's CQ, as mlx5's do.
    c.max_send_wr += tm::kRendezvousSlots;
    c.max_inline_data = std::max<uint32_t>(c.max_inline_data, kTmhBytes);
    rcq = srq->cq;
  }
  auto qp = std::make_unique<Qp>(qpn, type, pd, scq, rcq, c);
  qp->srq = srq;
  qp->np = cc::DcqcnNp(cfg_.cnp_interval_ns);
  start_qp_options(*qp);
  if (srq) ++srq_users_[srq];
  QpAttr a;
  a.sq_sig_all = sig_all;
  qp->flow.src = cfg_.gids.front();  // until an address vector names the source GID
  qp->flow.src_port = cfg_.src_port_for(qpn.value());
  qp->flow.dst_port = wire::kRoceV2Port;
  qp->set_sig_all(sig_all);
  Qp* p = qp.get();
  qps_[qpn] = std::move(qp);
  qp_index_.insert(qpn.value(), p);
  if (tgt) return p;
  ++pit->second;
  ++cq_users_[scq];
  ++cq_users_[rcq];
  return p;
}

bool ProtocolCore::pd_busy(PdHandle pd) const {
  UROCE_ASSERT_HELD(*this);
  auto it = pds_.find(pd);
  return it != pds_.end() && it->second;
}

bool ProtocolCore::cq_busy(Cq* cq) const {
  UROCE_ASSERT_HELD(*this);
  auto it = cq_users_.find(cq);
  return it != cq_users_.end() && it->second;
}

bool ProtocolCore::srq_busy(verbs::Srq* srq) const {
  UROCE_ASSERT_HELD(*this);
  auto it = srq_users_.find(srq);
  return it != srq_users_.end() && it->second;
}

namespace {

// A QP's own options are chosen before it talks: nothing is in flight to carry over.
Status before_it_talks(const Qp& qp, const char* what) {
  if (qp.state() == QpState::Reset || qp.state() == QpState::Init) return {};
  return make_error(EINVAL, std::string(what) + ": set it in RESET or INIT, before the QP talks");
}

}  // namespace

Status ProtocolCore::set_reliability(Qp& qp, Reliability r) {
  UROCE_ASSERT_HELD(*this);
  if (qp.type() != QpType::RC) return make_error(EINVAL, "reliability: RC QPs only");
  if (Status s = before_it_talks(qp, "reliability"); !s) return s;
  qp.sr_choice = r == Reliability::Sr;
  start_qp_options(qp);
  return {};
}

Status ProtocolCore::set_congestion_control(Qp& qp, cc::Algo a) {
  UROCE_ASSERT_HELD(*this);
  const bool rc = reliable_connected(qp.type()), uc = qp.type() == QpType::UC;
  if (!(rc || (uc && !cc::needs_round_trips(a))))
    return make_error(EINVAL, "congestion control: RC QPs (DCQCN and none also UC; TIMELY and Swift need ACKs)");
  if (Status s = before_it_talks(qp, "congestion control"); !s) return s;
  qp.cc_choice = a;
  start_qp_options(qp);
  return {};
}

Status ProtocolCore::check_rate_limit(const Qp& qp, const RateLimit& l) const {
  if (qp.type() == QpType::XrcRecv || qp.rss) return make_error(EINVAL, "rate limit: a QP that sends nothing");
  if (l.kbps && (l.kbps < limits_.min_rate_kbps || l.kbps > limits_.max_rate_kbps))
    return make_error(EINVAL, "rate limit: " + std::to_string(l.kbps) + " kbps is outside " +
                                  std::to_string(limits_.min_rate_kbps) + ".." + std::to_string(limits_.max_rate_kbps));
  if (l.max_burst_bytes > limits_.max_rate_burst)
    return make_error(EINVAL, "rate limit: max_burst_sz above " + std::to_string(limits_.max_rate_burst) + " bytes");
  return {};
}

Status ProtocolCore::set_rate_limit(Qp& qp, const RateLimit& l) {
  UROCE_ASSERT_HELD(*this);
  if (Status s = check_rate_limit(qp, l); !s) return s;
  qp.limit_bps = double(l.kbps) * 1000;
  qp.limit_burst = l.max_burst_bytes;
  qp.req.paced = qp.rate != nullptr || qp.limit_bps > 0;
  // The new rate from now: nothing stays booked at the old one (1 kb/s books a packet 8 s ahead).
  qp.pacer = cc::Pacer{};
  if (qp.state() == QpState::Rts) schedule(qp);  // a lower limit's timer, or none now
  return {};
}

Status ProtocolCore::modify_qp(Qp& qp, const QpAttr& attr, uint32_t mask) {
  UROCE_ASSERT_HELD(*this);
  // An RSS QP stays in RESET, sending and taking no receive of its own (as mlx5's).
  if (qp.rss) return make_error(EOPNOTSUPP, "modify_qp: an RSS QP has no state of its own (its work queues have)");
  if (mask & kQpRateLimit)
    if (Status s = check_rate_limit(qp, RateLimit{attr.rate_limit_kbps}); !s) return s;
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
  // What the attributes mean for the roles: the peer's address, the retry budgets, the PSNs
  // each side starts from, the responder's READ/atomic resources.
  if (mask & kQpAv) {
    qp.flow.dst = attr.dgid;
    qp.flow.src = cfg_.gids[attr.sgid_index];
  }
  if (mask & kQpRetryCnt) qp.comp.retry_left = attr.retry_cnt;
  if (mask & kQpRnrRetry) qp.comp.rnr_left = attr.rnr_retry;
  if (mask & kQpRqPsn) qp.resp.epsn = wire::Psn(attr.rq_psn);
  if (mask & kQpSqPsn) {
    qp.req.psn = wire::Psn(attr.sq_psn);
    qp.req.high = qp.req.psn;
    qp.comp.una = qp.req.psn;
  }
  if (mask & kQpMaxDestRdAtomic)
    qp.resp.resources.assign(attr.max_dest_rd_atomic ? attr.max_dest_rd_atomic : 1, RdAtomicResource{});
  if (mask & kQpRateLimit) (void)set_rate_limit(qp, RateLimit{attr.rate_limit_kbps});  // checked above
  QpState after = qp.state();
  if (after == QpState::Reset && before != QpState::Reset) reset_qp(qp);
  if (after == QpState::Err && before != QpState::Err) qp_to_error(qp, /*fatal=*/false);
  if (after == QpState::Rts) schedule(qp);
  return {};
}

Status ProtocolCore::destroy_qp(Qp* qp) {
  UROCE_ASSERT_HELD(*this);
  auto it = qp ? qps_.find(qp->qpn()) : qps_.end();
  if (it == qps_.end() || it->second.get() != qp) return make_error(EINVAL, "destroy_qp: unknown queue pair");
  if (flows_of(*qp)) return make_error(EBUSY, "destroy_qp: flow rules steer to it (destroy them first)");
  if (qp->active) sched_.erase(qp);
  std::erase(ack_list_, qp);
  for (McastGroup& g : mcast_) std::erase(g.qps, qp);  // its users detach first (the link's groups)
  std::erase_if(mcast_, [](const McastGroup& g) { return g.qps.empty(); });
  if (qp->type() == QpType::XrcRecv) {  // what it used was its domain's, not its own
    --xrcds_[qp->xrcd];
  } else {
    --pds_[qp->pd()];
    --cq_users_[qp->send_cq];
    --cq_users_[qp->recv_cq];
    if (qp->srq) --srq_users_[qp->srq];
    if (qp->rss)
      for (verbs::Srq* wq : qp->rss->table) --srq_users_[wq];
  }
  qp_index_.erase(qp->qpn().value());
  qps_.erase(it);
  return {};
}

Result<verbs::Srq*> ProtocolCore::create_srq(PdHandle pd, uint32_t depth, uint32_t max_sge) {
  UROCE_ASSERT_HELD(*this);
  auto pit = pds_.find(pd);
  if (pit == pds_.end()) return make_error(EINVAL, "create_srq: unknown protection domain");
  if (depth == 0 || depth > limits_.max_qp_wr) return make_error(EINVAL, "create_srq: max_wr must be 1.." + std::to_string(limits_.max_qp_wr));
  if (max_sge == 0 || max_sge > limits_.max_sge) return make_error(EINVAL, "create_srq: max_sge must be 1.." + std::to_string(limits_.max_sge));
  auto srq = std::make_unique<verbs::Srq>(next_srq_++, pd, depth, max_sge);
  verbs::Srq* p = srq.get();
  srqs_[p->handle()] = std::move(srq);
  srq_users_[p] = 0;
  ++pit->second;
  return p;
}

Status ProtocolCore::destroy_srq(verbs::Srq* srq) {
  UROCE_ASSERT_HELD(*this);
  auto it = srq_users_.find(srq);
  if (it == srq_users_.end()) return make_error(EINVAL, "destroy_srq: unknown shared receive queue");
  if (it->second) return make_error(EBUSY, "destroy_srq: queue pairs still use it");
  if (srq->xrcd) release_xrc_srq(*srq);
  if (srq->wq || srq->tm) --cq_users_[srq->cq];
  --pds_[srq->pd()];
  srq_users_.erase(it);
  srqs_.erase(srq->handle());
  return {};
}

Status ProtocolCore::modify_srq(verbs::Srq& srq, uint32_t limit) {
  UROCE_ASSERT_HELD(*this);
  if (limit > srq.rq.capacity()) return make_error(EINVAL, "modify_srq: srq_limit larger than the queue");
  if (limit && srq.wq) return make_error(EINVAL, "modify_srq: a work queue has no limit event");
  srq.limit.store(limit, std::memory_order_release);
  return {};
}

void ProtocolCore::raise(const AsyncEvent& e) {
  if (async_.size() >= 4096) async_.pop_front();  // nobody reads them: keep the newest
  async_.push_back(e);
  async_signal_ = true;
}

Result<AsyncEvent> ProtocolCore::get_async_event() {
  UROCE_ASSERT_HELD(*this);
  if (async_.empty()) return make_error(EAGAIN, "no async event pending");
  AsyncEvent e = async_.front();
  async_.pop_front();
  return e;
}

Qp* ProtocolCore::qp(Qpn qpn) {
  return qp_index_.find(qpn.value());
}

}  // namespace uroce::transport

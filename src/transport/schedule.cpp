// Scheduling: doorbells into the run list, the timer heap, and one progress pass over the QPs
// with work (engine lock held).
#include <algorithm>
#include <mutex>

#include "transport/roles.hpp"
#include "wire/mtu.hpp"

namespace uroce::transport {


// ---------------------------------------------------------------- engine side

void ProtocolCore::drain_doorbells() {
  doorbells_swap_.clear();
  {
    std::lock_guard g(doorbell_lock_);
    doorbells_swap_.swap(doorbells_);
  }
  doorbell_count_.fetch_sub(uint32_t(doorbells_swap_.size()), std::memory_order_seq_cst);
  for (Qpn qpn : doorbells_swap_) {
    Qp* q = qp(qpn);
    if (!q) continue;
    q->sq.doorbell.store(false, std::memory_order_release);
    if (q->state() == QpState::Err) q->flush_pending = true;
    schedule(*q);
  }
}

void ProtocolCore::schedule(Qp& qp) {
  if (!qp.active) {
    qp.active = true;
    qp.prio = sched_.priority_for(qp.attr().traffic_class, qp.attr().dgid, qp.qpn().value());
    sched_.push(qp);
  }
}

void ProtocolCore::want_ack(Qp& qp) {
  qp.resp.ack_pending = true;
  if (!qp.resp.in_ack_list) {
    qp.resp.in_ack_list = true;
    ack_list_.push_back(&qp);
  }
}

void ProtocolCore::arm_timer(Qp& qp, uint64_t deadline) {
  if (qp.timer_queued == 0 || deadline < qp.timer_queued) {
    qp.timer_queued = deadline;
    timers_.emplace(deadline, qp.qpn());
  }
}

void ProtocolCore::run_timers(uint64_t now) {
  while (!timers_.empty() && timers_.top().first <= now) {
    auto [when, qpn] = timers_.top();
    timers_.pop();
    Qp* q = qp(qpn);
    if (!q || q->timer_queued != when) continue;
    q->timer_queued = 0;
    auto& t = q->timers;
    for (QpTimer r : {QpTimer::Rnr, QpTimer::Pace})  // the requester may send again
      if (t.expired(r, now)) {
        t.stop(r);
        schedule(*q);
      }
    if (t.expired(QpTimer::Retransmit, now) || t.expired(QpTimer::Probe, now)) {
      Context cx(*this);
      completer_on_timer(cx, *q, now);
    }
    if (uint64_t next = t.next()) arm_timer(*q, next);
  }
}

uint64_t ProtocolCore::next_deadline() {
  UROCE_ASSERT_HELD(*this);
  // QPs held back by the port's rate go when it opens.
  const uint64_t port = !sched_.empty() && sched_.port_closed(now_) ? sched_.port_opens_at(now_) : UINT64_MAX;
  while (!timers_.empty()) {
    auto [when, qpn] = timers_.top();
    Qp* q = qp(qpn);
    if (q && q->timer_queued == when) return std::min(when, port);
    timers_.pop();
  }
  return port;
}

bool ProtocolCore::flush_acks(Context& cx) {
  if (ack_list_.empty()) return false;
  for (size_t i = 0; i < ack_list_.size(); ++i) responder_flush_ack(cx, *ack_list_[i]);
  // responder_flush_ack keeps a QP listed while its ACK must wait behind responses.
  std::erase_if(ack_list_, [](Qp* q) { return !q->resp.in_ack_list; });
  return true;
}

void ProtocolCore::gather_datagrams(Qp& qp, uint64_t now) {
  UROCE_ASSERT_HELD(*this);
  now_ = now;
  if (qp.type() != QpType::UD) return;
  Context cx(*this);
  uint32_t budget = UINT32_MAX;
  if (requester_run(cx, qp, now, budget)) schedule(qp);  // out of packet buffers: a pass goes on
}

bool ProtocolCore::progress(uint64_t now) {
  UROCE_ASSERT_HELD(*this);
  now_ = now;
  Context cx(*this);
  bool did = false;
  if (doorbell_count_.load(std::memory_order_seq_cst)) {
    drain_doorbells();
    did = true;
  }
  run_timers(now);
  // ACKs, NAKs and CNPs (made as packets arrived) go before any data.
  const bool acks = flush_acks(cx);
  if (!sched_.empty()) {
    did |= !sched_.port_closed(now);
    const size_t tx_at_start = tx_.size();
    // The QPs not reached go first next time, before those that ran and have more.
    auto go_on = [&] { return tx_.size() - tx_at_start < cfg_.budget_per_pass; };
    auto visit = [&](Qp& q, uint64_t max_bytes) -> uint64_t {
      q.active = false;
      if (q.flush_pending) {
        flush(q);
        return 0;
      }
      const size_t at = tx_.size();
      uint32_t budget = wire::packets_at_mtu(cfg_.budget_per_qp, q.mtu());
      if (max_bytes != UINT64_MAX)  // the port's rate: at least one packet, the rest booked after
        budget = uint32_t(std::clamp<uint64_t>(max_bytes / (q.mtu() + 64), 1, budget));
      bool more = responder_run(cx, q, budget);
      more |= requester_run(cx, q, now, budget);
      if (more) schedule(q);
      uint64_t bytes = 0;
      for (size_t i = at; i < tx_.size(); ++i) bytes += tx_[i]->len;
      return bytes;
    };
    sched_.pass(now, visit, go_on);
#define UROCE_PRIO_BYTES(p) ctr_.tx_prio##p##_bytes = sched_.sent_bytes(p);
    UROCE_PRIO_BYTES(0) UROCE_PRIO_BYTES(1) UROCE_PRIO_BYTES(2) UROCE_PRIO_BYTES(3)
    UROCE_PRIO_BYTES(4) UROCE_PRIO_BYTES(5) UROCE_PRIO_BYTES(6) UROCE_PRIO_BYTES(7)
#undef UROCE_PRIO_BYTES
  }
  // What waited behind this pass's responses.
  did |= acks | flush_acks(cx);
  return did || !tx_.empty();
}

}  // namespace uroce::transport

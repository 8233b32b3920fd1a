// The transmit scheduler's lists and port rate; its pass is in the header, inlined in the core's.
#include "transport/tx_scheduler.hpp"

#include <algorithm>

#include "transport/qp_transport.hpp"
#include "wire/ip_udp.hpp"

namespace uroce::transport {

void TxScheduler::configure(const PortQos& q, uint32_t visit_bytes) {
  qos_ = q;  // checked by check_qos; kept in range here all the same (a list index, divisors)
  for (uint8_t& p : qos_.dscp_prio) p &= kPriorities - 1;
  for (uint8_t& w : qos_.weight) w = std::max<uint8_t>(w, 1);
  qos_.share = std::max<uint8_t>(qos_.share, 1);
  uint8_t heaviest = 1;
  for (int p = 0; p < kPriorities; ++p)
    if (!qos_.strict[size_t(p)]) heaviest = std::max(heaviest, qos_.weight[size_t(p)]);
  // The heaviest ETS priority may run once more while ahead by less than one visit of its own.
  window_ = double(visit_bytes) / heaviest;
  port_bps_ = double(q.port_kbps) * 1000;
}

void TxScheduler::push(Qp& q) {
  lists_[q.prio].qps.push_back(&q);
  ++listed_;
}

void TxScheduler::erase(Qp* q) {
  for (List& l : lists_) {
    auto it = std::find(l.qps.begin() + ptrdiff_t(l.head), l.qps.end(), q);
    if (it == l.qps.end()) continue;
    l.qps.erase(it);
    --listed_;
  }
}

void TxScheduler::share_port(SharedPort* sp, uint32_t slot) {
  shared_ = sp && slot < SharedPort::kProcs ? sp : nullptr;
  slot_ = slot;
}

namespace {
// A shared clock a second ahead is another process's nonsense: the port is free now.
uint64_t sane(uint64_t at, uint64_t now) { return at > now + 1'000'000'000 ? now : at; }
}  // namespace

uint64_t TxScheduler::port_free_at(uint64_t now) const {
  return shared_ ? sane(shared_->free_at.load(std::memory_order_relaxed), now) : port_.free_at();
}

void TxScheduler::book_port(uint64_t bytes, uint64_t now) {
  const uint64_t ns = uint64_t(double(bytes) * 8e9 / port_bps_ + 0.5);
  if (!shared_) {
    port_.book(uint32_t(std::min<uint64_t>(bytes, UINT32_MAX)), port_bps_, now, kPortBurstNs);
    return;
  }
  const uint64_t floor = now > kPortBurstNs ? now - kPortBurstNs : 0;
  uint64_t at = shared_->free_at.load(std::memory_order_relaxed);
  while (!shared_->free_at.compare_exchange_weak(at, std::max(sane(at, now), floor) + ns, std::memory_order_relaxed)) {
  }
  shared_->proc[slot_].vbytes.fetch_add(bytes * 100 / qos_.share, std::memory_order_relaxed);
}

void TxScheduler::mark_waiting(uint64_t now) {
  if (!shared_ || port_bps_ == 0) return;
  const uint64_t was = shared_->proc[slot_].waiting_until.exchange(now + kProcWaitingNs, std::memory_order_relaxed);
  if (was <= now) came_back_ = true;  // it had not been waiting: it starts level with the others
}

bool TxScheduler::my_turn(uint64_t now) {
  if (!shared_ || port_bps_ == 0 || now < free_until_) return true;
  SharedPort::Proc& me = shared_->proc[slot_];
  uint64_t behind = UINT64_MAX;  // the furthest-behind other process waiting for the port
  for (uint32_t i = 0; i < SharedPort::kProcs; ++i) {
    const uint64_t until = shared_->proc[i].waiting_until.load(std::memory_order_relaxed);
    if (i != slot_ && until > now && until <= now + 2 * kProcWaitingNs)
      behind = std::min(behind, shared_->proc[i].vbytes.load(std::memory_order_relaxed));
  }
  uint64_t mine = me.vbytes.load(std::memory_order_relaxed);
  if (behind != UINT64_MAX && mine < behind && came_back_)  // no credit for the time it was idle
    me.vbytes.store(mine = behind, std::memory_order_relaxed);
  came_back_ = false;
  if (behind == UINT64_MAX || mine <= behind + kProcWindowBytes * 100) {
    held_since_ = 0;
    return true;
  }
  if (held_since_ == 0) held_since_ = now;
  if (now - held_since_ >= kProcMaxHoldNs) {  // it never catches up: as long again without it
    held_since_ = 0;
    free_until_ = now + kProcMaxHoldNs;
    return true;
  }
  held_until_ = now + kProcHoldNs;
  return false;
}

uint8_t TxScheduler::priority_for(uint8_t traffic_class, const Gid& peer, uint32_t qpn) {
  if (shared_) {
    // Read under the daemon's sequence lock; a writer seen at work keeps the last good copy.
    const uint32_t v = shared_->class_version.load(std::memory_order_acquire);
    if (v != class_seen_ && !(v & 1)) {
      std::vector<SharedPort::Class> copy(shared_->classes, shared_->classes + std::min(shared_->nclasses, SharedPort::kClasses));
      std::atomic_thread_fence(std::memory_order_acquire);
      if (shared_->class_version.load(std::memory_order_relaxed) == v) {
        classes_ = std::move(copy);
        class_seen_ = v;
      }
    }
    for (const SharedPort::Class& c : classes_)
      if (qpn >= c.qpn_lo && qpn <= c.qpn_hi && c.prio < kPriorities && wire::in_prefix(peer.raw.data(), c.gid, c.bits))
        return c.prio;
  }
  return priority_of(traffic_class);
}

uint64_t TxScheduler::port_room(uint64_t now) const {
  if (port_bps_ == 0) return UINT64_MAX;
  const uint64_t from = std::max(port_free_at(now), now > kPortBurstNs ? now - kPortBurstNs : 0);
  const uint64_t until = now + kPortSlackNs;
  return from >= until ? 0 : uint64_t(double(until - from) * port_bps_ / 8e9);
}

void TxScheduler::compact(List& l) {
  if (l.head == 0) return;
  l.qps.erase(l.qps.begin(), l.qps.begin() + ptrdiff_t(l.head));  // keeps the capacity
  l.head = 0;
}

}  // namespace uroce::transport

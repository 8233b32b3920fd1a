// The transmit scheduler's lists and port rate; its pass is in the header, inlined in the core's.
#include "transport/tx_scheduler.hpp"

#include <algorithm>

#include "transport/qp_transport.hpp"

namespace uroce::transport {

void TxScheduler::configure(const PortQos& q, uint32_t visit_bytes) {
  qos_ = q;
  uint8_t heaviest = 1;
  for (int p = 0; p < kPriorities; ++p)
    if (!q.strict[size_t(p)]) heaviest = std::max(heaviest, q.weight[size_t(p)]);
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

uint64_t TxScheduler::port_room(uint64_t now) const {
  if (port_bps_ == 0) return UINT64_MAX;
  const uint64_t from = std::max(port_.free_at(), now > kPortBurstNs ? now - kPortBurstNs : 0);
  const uint64_t until = now + kPortSlackNs;
  return from >= until ? 0 : uint64_t(double(until - from) * port_bps_ / 8e9);
}

void TxScheduler::compact(List& l) {
  if (l.head == 0) return;
  l.qps.erase(l.qps.begin(), l.qps.begin() + ptrdiff_t(l.head));  // keeps the capacity
  l.head = 0;
}

}  // namespace uroce::transport

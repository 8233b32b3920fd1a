#include "sim/sim.hpp"

#include <algorithm>

namespace uroce::sim {

transport::Nic& Sim::add_nic(uint32_t ip, transport::NicConfig cfg) {
  cfg.local_ip = ip;
  if (!cfg.seed) cfg.seed = 0x5eed0000 + ip;
  nics_.push_back(std::make_unique<transport::Nic>(std::move(cfg)));
  return *nics_.back();
}

bool Sim::step() {
  bool did = false;
  for (auto& n : nics_) {
    did |= n->progress(now_);
    for (transport::TxPacket* p : n->tx_queue()) {
      link_.send(p->data, p->len, p->flow, now_);
      n->release(p);
    }
    n->tx_queue().clear();
    n->cq_events().clear();
  }
  link::LossyLink::Frame fr;
  while (link_.pop_due(now_, fr)) {
    did = true;
    for (auto& n : nics_)
      if (n->config().local_ip == fr.flow.dst_ip) n->on_packet(fr.bytes, fr.flow, now_);
  }
  return did;
}

bool Sim::run_until(const std::function<bool()>& done, uint64_t max_ns) {
  uint64_t end = now_ + max_ns;
  while (!done()) {
    if (step()) continue;
    uint64_t next = link_.next_due();
    for (auto& n : nics_) next = std::min(next, n->next_deadline());
    if (next == UINT64_MAX || next > end) return done();
    now_ = std::max(now_, next);
  }
  return true;
}

}  // namespace uroce::sim

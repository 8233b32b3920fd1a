#include "sim/sim.hpp"

#include <algorithm>

#include "engine/attach.hpp"

namespace uroce::sim {

transport::ProtocolCore& Sim::add_core(uint32_t ip, transport::CoreConfig cfg) { return add_core(Gid::from_ipv4(ip), cfg); }

transport::ProtocolCore& Sim::add_core(const Gid& ip, transport::CoreConfig cfg) {
  Node n;
  n.ip = ip;
  n.port = link_.attach(ip);
  cfg.gids = {ip};
  if (!cfg.seed) cfg.seed = 0x5eed0000 + wire::v4_of(ip) + ip.raw[7];
  link::Link* port = n.port.get();
  cfg.src_port_for = [port](uint32_t qpn) { return port->src_port_for(qpn); };
  n.pc = std::make_unique<transport::ProtocolCore>(std::move(cfg));
  nodes_.push_back(std::move(n));
  return *nodes_.back().pc;
}

bool Sim::step() {
  bool did = false;
  for (auto& n : nodes_) {
    did |= n.pc->progress(now_);
    engine::transmit(*n.pc, *n.port, now_);
    n.pc->cq_events().clear();
  }
  // What is due goes to its host in the order it came due (one pass over the link, however
  // many hosts there are).
  sim::LossyLink::Frame f;
  while (link_.pop_due(now_, f)) {
    auto it = std::find_if(nodes_.begin(), nodes_.end(), [&](const Node& n) { return n.ip == f.flow.dst; });
    if (it == nodes_.end()) continue;  // attached ports only: not reached
    wire::Ipv4Fields ip;  // in memory: the header is what was sent, and what marked it
    ip.tos = f.tos;
    it->pc->on_packet(f.bytes, f.flow, now_, ip);
    did = true;
  }
  return did;
}

bool Sim::run_until(const std::function<bool()>& done, uint64_t max_ns) {
  uint64_t end = now_ + max_ns;
  while (!done()) {
    if (step()) continue;
    uint64_t next = link_.next_due();
    for (auto& n : nodes_) next = std::min(next, n.pc->next_deadline());
    if (next == UINT64_MAX || next > end) return done();
    now_ = std::max(now_, next);
  }
  return true;
}

}  // namespace uroce::sim

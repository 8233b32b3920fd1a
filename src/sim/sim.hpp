// Deterministic simulator: several protocol cores on one lossy in-memory link, one virtual
// clock. Each step lets every core progress, moves their packets onto the link, and delivers
// what is due; when nothing is left to do now, time jumps to the next timer or delivery.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "sim/fabric.hpp"
#include "transport/protocol_core.hpp"

namespace uroce::sim {

class Sim {
 public:
  Sim(uint64_t seed, sim::FaultConfig faults) : link_(seed, faults) {}

  transport::ProtocolCore& add_core(uint32_t ip, transport::CoreConfig cfg = {});
  transport::ProtocolCore& add_core(const Gid& ip, transport::CoreConfig cfg = {});
  sim::LossyLink& link() { return link_; }
  uint64_t now() const { return now_; }

  // Runs until done() holds (true) or virtual time passes max_ns or nothing can happen (false).
  bool run_until(const std::function<bool()>& done, uint64_t max_ns);
  // One step at the current time; true if anything happened.
  bool step();

 private:
  sim::LossyLink link_;
  uint64_t now_ = 1'000'000;
  struct Node {
    Gid ip;
    std::unique_ptr<link::Link> port;
    std::unique_ptr<transport::ProtocolCore> pc;
  };
  std::vector<Node> nodes_;
};

}  // namespace uroce::sim

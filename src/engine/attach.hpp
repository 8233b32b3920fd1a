// A protocol core attached to a link: the core as the link's packet sink, and its queued
// packets handed to the link. Both the engine thread and the simulator attach cores this way.
#pragma once
#include <random>

#include "link/link.hpp"
#include "transport/protocol_core.hpp"

namespace uroce::engine {

class ProtocolSink final : public link::PacketSink {
 public:
  explicit ProtocolSink(transport::ProtocolCore& pc) : pc_(pc) {}
  wire::Ipv4Fields deliver(std::span<const uint8_t> pkt, const wire::FlowAddr& from, uint64_t now,
                           const wire::Ipv4Fields& ip) override {
    if (loss_ > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < loss_) {
      ++lost_;
      return ip;
    }
    return pc_.on_packet(pkt, from, now, ip);
  }
  wire::Ipv4Fields deliver_apart(std::span<const uint8_t> rest, const wire::ApartPayload& payload,
                                 const wire::FlowAddr& from, uint64_t now, const wire::Ipv4Fields& ip) override {
    if (loss_ > 0) return link::PacketSink::deliver_apart(rest, payload, from, now, ip);  // counted there
    return pc_.on_packet(rest, from, now, ip, &payload);
  }
  // A lossy fabric in front of the core: each arriving packet is lost with probability p
  // (seeded), to study recovery on the real engine. 0: none.
  void set_loss(double p, uint64_t seed) {
    loss_ = p;
    rng_.seed(seed);
  }
  uint64_t lost() const { return lost_; }

 private:
  transport::ProtocolCore& pc_;
  double loss_ = 0;
  uint64_t lost_ = 0;
  std::mt19937_64 rng_;
};

// Sends what the core has queued and takes the buffers back.
inline void transmit(transport::ProtocolCore& pc, link::Link& link, uint64_t now) {
  if (pc.tx_queue().empty()) return;
  link.send(pc.tx_queue(), now);
  pc.release_tx();
}

}  // namespace uroce::engine

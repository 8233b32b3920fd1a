// A protocol core attached to a link: the core as the link's packet sink, and its queued
// packets handed to the link. Both the engine thread and the simulator attach cores this way.
#pragma once
#include "link/link.hpp"
#include "transport/protocol_core.hpp"

namespace uroce::engine {

class CoreSink final : public link::PacketSink {
 public:
  explicit CoreSink(transport::ProtocolCore& nic) : nic_(nic) {}
  wire::Ipv4Fields deliver(std::span<const uint8_t> pkt, const wire::FlowAddr& from, uint64_t now,
                           const wire::Ipv4Fields& ip) override {
    return nic_.on_packet(pkt, from, now, ip);
  }

 private:
  transport::ProtocolCore& nic_;
};

// Sends what the core has queued and takes the buffers back.
inline void transmit(transport::ProtocolCore& nic, link::Link& link, uint64_t now) {
  if (nic.tx_queue().empty()) return;
  link.send(nic.tx_queue(), now);
  nic.release_tx();
}

}  // namespace uroce::engine

// The fabric's bandwidth-delay product in packets, which the simulator knows from its topology
// and selective repeat's window is sized by (CoreConfig::sr_window_pkts).
#pragma once
#include <cmath>
#include <cstdint>

#include "uroce/types.hpp"

namespace uroce::sim {

// A round trip with empty queues: `hops` one-way delays, a full packet (and its headers)
// stored and forwarded `stores` times at the line rate; the ACK is small.
inline uint64_t base_rtt_ns(double rate_gbps, uint64_t delay_ns, uint32_t hops, uint32_t stores, Mtu mtu) {
  return hops * delay_ns + uint64_t(stores * (mtu_bytes(mtu) + 100) * 8 / rate_gbps);
}

// Selective repeat's window: two bandwidth-delay products. With one, the line idles whenever
// a hole or a coalesced ACK holds the oldest unacknowledged packet back a little (0.74 of the
// line at 1 % loss, 100 Gb/s); with two it stays full and the sender's queue stays small.
inline uint32_t sr_window_pkts(double rate_gbps, uint64_t rtt_ns, Mtu mtu) {
  return 2 * uint32_t(std::ceil(rate_gbps * double(rtt_ns) / (8.0 * mtu_bytes(mtu))));
}

}  // namespace uroce::sim

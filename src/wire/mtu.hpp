// The port's active MTU from the network interface's: the largest IB MTU whose RoCEv2 packets
// fit one IP packet with DF set (RoCE is never fragmented; rxe derives its active MTU the same way).
#pragma once
#include <cstdint>

#include "uroce/types.hpp"
#include "wire/ip_udp.hpp"
#include "wire/opcode.hpp"

namespace uroce::wire {

// IP + UDP + BTH + the longest extension headers of a packet with payload (RETH + ImmDt, an
// RDMA WRITE ONLY with immediate) + ICRC.
constexpr uint32_t roce_overhead(bool ipv6) {
  return (ipv6 ? 40u : uint32_t(kIpv4Len)) + kUdpLen + kBthLen + kRethLen + kImmDtLen + kIcrcLen;
}

constexpr Mtu active_mtu_for(uint32_t ip_mtu, bool ipv6 = false) {
  for (Mtu m : {Mtu::Mtu4096, Mtu::Mtu2048, Mtu::Mtu1024, Mtu::Mtu512})
    if (mtu_bytes(m) + roce_overhead(ipv6) <= ip_mtu) return m;
  return Mtu::Mtu256;  // the least IB allows, whatever the link
}

// As many packets of a path MTU of `mtu` bytes as carry what n packets of MTU 4096 do: the
// requester's window and a pass's budget count those, so that a QP at a smaller path MTU keeps
// as many bytes in flight and sends as many a pass.
constexpr uint32_t packets_at_mtu(uint32_t n, uint32_t mtu) { return n * (4096 / (mtu < 256 ? 256 : mtu)); }
static_assert(packets_at_mtu(256, 1024) == 1024 && packets_at_mtu(32, 4096) == 32);

static_assert(active_mtu_for(1500) == Mtu::Mtu1024);
static_assert(active_mtu_for(9000) == Mtu::Mtu4096);
static_assert(active_mtu_for(65536) == Mtu::Mtu4096);
static_assert(active_mtu_for(4096 + 64) == Mtu::Mtu4096 && active_mtu_for(4096 + 63) == Mtu::Mtu2048);

}  // namespace uroce::wire

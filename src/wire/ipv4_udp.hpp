// IPv4 + UDP headers around a RoCEv2 packet (Annex A17.4). Used for the ICRC, which covers
// most of them, and for packet captures.
#pragma once
#include <cstdint>
#include <span>

namespace uroce::wire {

inline constexpr uint16_t kRoceV2Port = 4791;
inline constexpr size_t kIpv4Len = 20, kUdpLen = 8, kEthLen = 14;

// A flow as the ICRC and a capture see it. Addresses and ports in host order.
struct FlowAddr {
  uint32_t src_ip = 0, dst_ip = 0;
  uint16_t src_port = 0, dst_port = kRoceV2Port;
};

// The IPv4 header fields the ICRC covers besides addresses. Our sender makes them predictable:
// ID 0 and DF, which is what Linux writes for an unconnected UDP socket with PMTU discovery on.
struct Ipv4Fields {
  uint16_t id = 0;
  uint16_t flags_frag = 0x4000;  // DF
  uint8_t tos = 0;
  uint8_t ttl = 64;
  // False when the receiver could not see the header (an ordinary UDP socket): id and DF are
  // then what our own sender writes, and the ICRC check may solve for the sender's real ones.
  bool seen = true;
};

// Writes 20 bytes of IPv4 and 8 of UDP for a UDP payload of udp_payload_len bytes.
// with_checksum = false leaves the IPv4 checksum 0 (the ICRC masks it anyway).
void write_ipv4_udp(uint8_t* out, const FlowAddr& f, size_t udp_payload_len, const Ipv4Fields& ip = {},
                    bool with_checksum = true);

uint16_t ipv4_checksum(const uint8_t* hdr, size_t len);

}  // namespace uroce::wire

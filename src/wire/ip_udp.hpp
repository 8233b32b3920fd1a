// IPv4 or IPv6 + UDP headers around a RoCEv2 packet (Annex A17.4). Used for the ICRC, which
// covers most of them, and for packet captures. Addresses are RoCE v2 GIDs: IPv4-mapped
// (::ffff:a.b.c.d) for IPv4, the address itself for IPv6.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "uroce/types.hpp"

namespace uroce::wire {

inline constexpr uint16_t kRoceV2Port = 4791;
inline constexpr size_t kIpv4Len = 20, kIpv6Len = 40, kUdpLen = 8, kEthLen = 14;

// A UDP source port for a QP's packets where no socket chose one (flow entropy, A17.4.2).
inline uint16_t entropy_port(uint32_t qpn) { return uint16_t(0xc000 | (qpn & 0x3fff)); }

inline bool is_v4(const Gid& g) {
  for (int i = 0; i < 10; ++i)
    if (g.raw[i]) return false;
  return g.raw[10] == 0xff && g.raw[11] == 0xff;
}
// A multicast group's GID: an IPv4-mapped 224.0.0.0/4 address, or IPv6 ff00::/8 (which is also
// the IB multicast GID prefix).
// Whether the first `bits` bits (0..128) of the 16-byte addresses a and net agree: an IPv4
// prefix counts its bits within the mapped GID (96 + its own).
inline bool in_prefix(const uint8_t* a, const uint8_t* net, int bits) {
  for (int i = 0; i < 16 && bits > 0; ++i, bits -= 8) {
    const uint8_t mask = bits >= 8 ? 0xff : uint8_t(0xff << (8 - bits));
    if ((a[i] & mask) != (net[i] & mask)) return false;
  }
  return true;
}

inline bool is_multicast(const Gid& g) { return is_v4(g) ? (g.raw[12] & 0xf0) == 0xe0 : g.raw[0] == 0xff; }
// The IPv4 address (host order) of an IPv4-mapped GID.
inline uint32_t v4_of(const Gid& g) {
  return uint32_t(g.raw[12]) << 24 | uint32_t(g.raw[13]) << 16 | uint32_t(g.raw[14]) << 8 | g.raw[15];
}

// A flow as the ICRC and a capture see it; both ends of one family. Ports in host order.
struct FlowAddr {
  Gid src, dst;
  uint16_t src_port = 0, dst_port = kRoceV2Port;
  bool v4() const { return is_v4(src); }
  bool operator==(const FlowAddr&) const = default;
  static FlowAddr ipv4(uint32_t src, uint32_t dst, uint16_t src_port, uint16_t dst_port = kRoceV2Port) {
    return {Gid::from_ipv4(src), Gid::from_ipv4(dst), src_port, dst_port};
  }
};

// The IP header fields the ICRC covers besides addresses and lengths (tos and ttl are masked
// out of it; for IPv6 they stand for traffic class and hop limit, and id/flags do not exist).
// Our sender makes them predictable: ID 0 and DF, which is what Linux writes for an
// unconnected UDP socket with PMTU discovery on.
// ECN: the low two bits of the IPv4 TOS or IPv6 traffic class (RFC 3168).
inline constexpr uint8_t kEcnMask = 3, kEcnEct0 = 2, kEcnCe = 3;
inline bool ce_marked(uint8_t tos) { return (tos & kEcnMask) == kEcnCe; }

struct Ipv4Fields {
  uint16_t id = 0;
  uint16_t flags_frag = 0x4000;  // DF
  uint8_t tos = 0;
  uint8_t ttl = 64;
  // False when the receiver could not see the header (an ordinary UDP socket): id and DF are
  // then what our own sender writes, and the ICRC check may solve for the sender's real ones.
  bool seen = true;
  // Not an IP field: the link carried the packet intact from a uroce sender that left its ICRC
  // out (same-host memory, as a NIC's internal loopback): there is nothing to check.
  bool icrc_absent = false;
};

// Length of the IP + UDP headers of a flow: 28 (IPv4) or 48 (IPv6).
inline size_t ip_udp_len(const FlowAddr& f) { return (f.v4() ? kIpv4Len : kIpv6Len) + kUdpLen; }

// Writes the IP and UDP headers for a UDP payload of udp_payload_len bytes; returns their
// length. with_checksum = false leaves the IPv4 checksum 0 (the ICRC masks it anyway).
size_t write_ip_udp(uint8_t* out, const FlowAddr& f, size_t udp_payload_len, const Ipv4Fields& ip = {},
                    bool with_checksum = true);

uint16_t ipv4_checksum(const uint8_t* hdr, size_t len);

// The UDP checksum of an IPv6 datagram (mandatory there, RFC 8200): over the pseudo-header of
// the IPv6 header at ip6, and the UDP header (its checksum field 0) and payload at udp.
uint16_t udp6_checksum(const uint8_t* ip6, const uint8_t* udp, size_t udp_len);

}  // namespace uroce::wire

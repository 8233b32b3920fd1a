// Invariant CRC for RoCEv2 over IPv4 and IPv6 (IBA Annex A17.4.1): CRC-32 over 8 bytes of
// ones, the IP and UDP headers with their variant fields masked to ones (IPv4: TOS, TTL,
// checksum; IPv6: traffic class, flow label, hop limit; UDP checksum), and the packet from the
// BTH on, with the BTH's reserved byte masked. Stored little-endian after the payload.
#pragma once
#include <array>
#include <cstdint>
#include <span>

#include "wire/ip_udp.hpp"

namespace uroce::wire {

// ip_udp: the IPv4 (28 bytes) or IPv6 (48 bytes) and UDP header as sent, told apart by the IP
// version; ib: BTH .. end of pad (no ICRC).
uint32_t icrc_compute(const uint8_t* ip_udp, std::span<const uint8_t> ib);

// For our own flows: builds the predictable IP/UDP header, then computes.
uint32_t icrc_for_flow(const FlowAddr& f, std::span<const uint8_t> ib, const Ipv4Fields& ip = {});

// The same over a packet in pieces (headers, payload, pad), the first holding the BTH.
uint32_t icrc_for_flow(const FlowAddr& f, std::span<const std::span<const uint8_t>> ib, const Ipv4Fields& ip = {});

struct PacketBuf;
// Computes and stores the ICRC of a packet buffer built for our own flow (its first ib_len
// bytes are BTH .. pad; a payload by reference is read where it lies).
void icrc_fill(PacketBuf& p, size_t ib_len);

void icrc_store(uint8_t* at, uint32_t icrc);
uint32_t icrc_load(const uint8_t* at);

// Checks a whole UDP payload (ending in its ICRC) received on flow f.
bool icrc_ok(const FlowAddr& f, std::span<const uint8_t> udp_payload, const Ipv4Fields& ip = {});

// How an ICRC was found good (see icrc_check).
enum class IcrcMatch : uint8_t { Bad, Seen, Assumed, Solved };

// Checks the ICRC. With ip.seen the header fields are known and the check is exact (Seen).
// Without, the sender's IPv4 ID is unknown (DF is set on every RoCE packet); ip.id is tried
// first (Assumed): 0, what Linux's unconnected UDP sockets write, or for a segment of a GRO
// buffer the ID after the previous segment's, as segmentation numbers them. Then it is solved
// for: CRC-32 is affine in its 16 bits, so the one ID that makes the ICRC right, if any,
// follows from the CRC's difference by linear algebra (Solved; ip.id then holds it). A random
// corruption passes that with probability 2^-16, where the exact check lets 2^-32 through.
IcrcMatch icrc_check(const FlowAddr& f, std::span<const uint8_t> udp_payload, Ipv4Fields& ip);

// Carries ICRCs of IPv4 packets of one length (ib_len bytes from the BTH on, without the ICRC)
// from the IP ID they were computed with to another: what segmentation offload, which numbers
// the segments of a send one by one, needs for each segment. Made once for a length (a few
// multiplications), then a few XORs a packet, no pass over its bytes.
class Ipv4IdShift {
 public:
  explicit Ipv4IdShift(size_t ib_len);
  uint32_t operator()(uint32_t icrc, uint16_t id_was, uint16_t id) const;

 private:
  std::array<uint32_t, 16> unit_{};  // the ICRC's difference for each bit of the ID's
};

}  // namespace uroce::wire

// How rdma_cm carries IP addressing over the IB CM (IBA Annex A11, "RDMA IP CM Service"): the
// service ID names the port space and port, and the first 36 bytes of a REQ's (or SIDR_REQ's)
// private data carry the IP addresses and source port, so the passive side can match a listener
// and report the peer's address. Linux's rdma_cm and librdmacm speak exactly this.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "uroce/types.hpp"

namespace uroce::cm {

// rdma_cm port spaces (values as librdmacm's enum rdma_port_space).
enum class PortSpace : uint16_t { IpoIb = 0x0002, Ib = 0x013f, Tcp = 0x0106, Udp = 0x0111 };

inline constexpr uint64_t kIpServicePrefix = 0x0000000001000000ull;  // 00 00 00 00 01: IP CM
inline constexpr size_t kIpCmHeaderBytes = 36;

inline uint64_t ip_service_id(PortSpace ps, uint16_t port) { return uint64_t(uint16_t(ps)) << 16 | port; }
// The port space and port of an IP CM service ID, or nullopt for a service ID of another kind.
std::optional<std::pair<PortSpace, uint16_t>> parse_ip_service_id(uint64_t sid);

// The private-data header (IBA A11.6.1, Table 542).
struct IpCmHeader {
  uint8_t version = 0;       // major 0, minor 0
  uint8_t ip_version = 4;    // 4 or 6
  uint16_t src_port = 0;
  Gid src, dst;              // IPv4 as IPv4-mapped GIDs
};

// Writes the header into the first 36 bytes of out (which must hold them).
void write_ip_cm_header(const IpCmHeader& h, std::span<uint8_t> out);
// Reads it; nullopt if the data is too short or says an IP version other than 4 or 6.
std::optional<IpCmHeader> read_ip_cm_header(std::span<const uint8_t> in);

}  // namespace uroce::cm

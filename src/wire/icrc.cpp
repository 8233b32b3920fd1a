#include "wire/icrc.hpp"

#include <cstring>

#include "wire/crc32.hpp"
#include "wire/opcode.hpp"

namespace uroce::wire {

uint32_t icrc_compute(const uint8_t* ip_udp, std::span<const uint8_t> ib) {
  uint8_t pre[8 + kIpv4Len + kUdpLen + kBthLen];
  std::memset(pre, 0xff, 8);
  std::memcpy(pre + 8, ip_udp, kIpv4Len + kUdpLen);
  uint8_t* ip = pre + 8;
  ip[1] = 0xff;                 // TOS (DSCP/ECN may change in flight)
  ip[8] = 0xff;                 // TTL
  ip[10] = ip[11] = 0xff;       // header checksum
  ip[kIpv4Len + 6] = ip[kIpv4Len + 7] = 0xff;  // UDP checksum
  size_t bth = ib.size() < kBthLen ? ib.size() : kBthLen;
  std::memcpy(pre + 8 + kIpv4Len + kUdpLen, ib.data(), bth);
  if (bth > 4) pre[8 + kIpv4Len + kUdpLen + 4] = 0xff;  // BTH resv8a
  uint32_t crc = crc32_update(0, pre, 8 + kIpv4Len + kUdpLen + bth);
  if (ib.size() > bth) crc = crc32_update(crc, ib.data() + bth, ib.size() - bth);
  return crc;
}

uint32_t icrc_for_flow(const FlowAddr& f, std::span<const uint8_t> ib, const Ipv4Fields& ip) {
  uint8_t hdr[kIpv4Len + kUdpLen];
  write_ipv4_udp(hdr, f, ib.size() + kIcrcLen, ip, /*with_checksum=*/false);
  return icrc_compute(hdr, ib);
}

void icrc_store(uint8_t* at, uint32_t v) {
  at[0] = uint8_t(v); at[1] = uint8_t(v >> 8); at[2] = uint8_t(v >> 16); at[3] = uint8_t(v >> 24);
}
uint32_t icrc_load(const uint8_t* at) {
  return uint32_t(at[0]) | uint32_t(at[1]) << 8 | uint32_t(at[2]) << 16 | uint32_t(at[3]) << 24;
}

bool icrc_ok(const FlowAddr& f, std::span<const uint8_t> pkt, const Ipv4Fields& ip) {
  if (pkt.size() < kBthLen + kIcrcLen) return false;
  auto body = pkt.first(pkt.size() - kIcrcLen);
  return icrc_for_flow(f, body, ip) == icrc_load(pkt.data() + body.size());
}

}  // namespace uroce::wire

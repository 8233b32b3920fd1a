#include "wire/ip_udp.hpp"

#include <cstring>

#include "wire/bytes.hpp"

namespace uroce::wire {

uint16_t ipv4_checksum(const uint8_t* h, size_t len) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < len; i += 2) sum += read_be16(h + i);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return uint16_t(~sum);
}

namespace {

// The ones' complement sum of n bytes, as 16-bit big-endian words, 8 bytes at a time.
uint64_t sum_be16(const uint8_t* p, size_t n, uint64_t sum) {
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    w = __builtin_bswap64(w);
    sum += (w >> 32) + (w & 0xffffffff);  // each half is two words; carries are folded below
  }
  for (; n >= 2; p += 2, n -= 2) sum += read_be16(p);
  if (n) sum += uint32_t(*p) << 8;
  return sum;
}

uint16_t fold(uint64_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return uint16_t(sum);
}

}  // namespace

uint16_t udp6_checksum(const uint8_t* ip6, const uint8_t* udp, size_t udp_len) {
  uint64_t sum = sum_be16(ip6 + 8, 32, 0);  // source and destination addresses
  sum += udp_len + 17;                      // upper-layer length, next header
  const uint16_t c = uint16_t(~fold(sum_be16(udp, udp_len, sum)));
  return c ? c : 0xffff;  // 0 would say "no checksum", which IPv6 does not allow
}

size_t write_ip_udp(uint8_t* p, const FlowAddr& f, size_t payload_len, const Ipv4Fields& ip, bool with_checksum) {
  size_t ip_len;
  if (f.v4()) {
    ip_len = kIpv4Len;
    p[0] = 0x45;
    p[1] = ip.tos;
    write_be16(p + 2, uint16_t(kIpv4Len + kUdpLen + payload_len));
    write_be16(p + 4, ip.id);
    write_be16(p + 6, ip.flags_frag);
    p[8] = ip.ttl;
    p[9] = 17;  // UDP
    write_be16(p + 10, 0);
    write_be32(p + 12, v4_of(f.src));
    write_be32(p + 16, v4_of(f.dst));
    if (with_checksum) write_be16(p + 10, ipv4_checksum(p, kIpv4Len));
  } else {
    ip_len = kIpv6Len;
    p[0] = uint8_t(0x60 | ip.tos >> 4);
    p[1] = uint8_t(ip.tos << 4);  // flow label 0
    p[2] = p[3] = 0;
    write_be16(p + 4, uint16_t(kUdpLen + payload_len));
    p[6] = 17;  // UDP
    p[7] = ip.ttl;
    std::memcpy(p + 8, f.src.raw.data(), 16);
    std::memcpy(p + 24, f.dst.raw.data(), 16);
  }
  uint8_t* u = p + ip_len;
  write_be16(u, f.src_port);
  write_be16(u + 2, f.dst_port);
  write_be16(u + 4, uint16_t(kUdpLen + payload_len));
  write_be16(u + 6, 0);  // RoCEv2 senders may leave the UDP checksum 0 (A17.4.3)
  return ip_len + kUdpLen;
}

}  // namespace uroce::wire

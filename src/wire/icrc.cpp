#include "wire/icrc.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "wire/crc32.hpp"
#include "wire/opcode.hpp"
#include "wire/packet_buf.hpp"

namespace uroce::wire {

namespace {

// The CRC of the masked pseudo-header, then of the IB packet in pieces. Its first bytes join the
// pseudo-header in one 64-byte block, which carry-less multiplication folds where the
// table-driven CRC would take them byte by byte.
constexpr size_t kFoldBlock = 64;
uint32_t icrc_over(const uint8_t* ip_udp, std::span<const std::span<const uint8_t>> ib) {
  uint8_t pre[8 + kIpv6Len + kUdpLen + kBthLen + kFoldBlock];
  std::memset(pre, 0xff, 8);  // the masked LRH of InfiniBand
  const bool v6 = (ip_udp[0] >> 4) == 6;
  const size_t ip_len = v6 ? kIpv6Len : kIpv4Len, hdr = 8 + ip_len + kUdpLen;
  std::memcpy(pre + 8, ip_udp, ip_len + kUdpLen);
  uint8_t* ip = pre + 8;
  if (v6) {
    ip[0] |= 0x0f;              // traffic class and flow label (may change in flight)
    ip[1] = ip[2] = ip[3] = 0xff;
    ip[7] = 0xff;               // hop limit
  } else {
    ip[1] = 0xff;               // TOS (DSCP/ECN may change in flight)
    ip[8] = 0xff;               // TTL
    ip[10] = ip[11] = 0xff;     // header checksum
  }
  ip[ip_len + 6] = ip[ip_len + 7] = 0xff;  // UDP checksum
  // Gather the BTH at least, and up to the block's end.
  const size_t want = std::max(hdr + kBthLen, kFoldBlock);
  size_t n = hdr, piece = 0, off = 0;
  while (n < want && piece < ib.size()) {
    const size_t take = std::min(ib[piece].size() - off, want - n);
    if (take) std::memcpy(pre + n, ib[piece].data() + off, take);  // an empty piece may have no address
    n += take;
    off += take;
    if (off == ib[piece].size()) ++piece, off = 0;
  }
  if (n > hdr + 4) pre[hdr + 4] = 0xff;  // BTH resv8a
  uint32_t crc = crc32_update(0, pre, n);
  for (; piece < ib.size(); ++piece, off = 0) crc = crc32_update(crc, ib[piece].data() + off, ib[piece].size() - off);
  return crc;
}

}  // namespace

uint32_t icrc_compute(const uint8_t* ip_udp, std::span<const uint8_t> ib) {
  return icrc_over(ip_udp, std::span<const std::span<const uint8_t>>(&ib, 1));
}

uint32_t icrc_for_flow(const FlowAddr& f, std::span<const std::span<const uint8_t>> ib, const Ipv4Fields& ip) {
  size_t len = 0;
  for (std::span<const uint8_t> piece : ib) len += piece.size();
  uint8_t hdr[kIpv6Len + kUdpLen];
  write_ip_udp(hdr, f, len + kIcrcLen, ip, /*with_checksum=*/false);
  return icrc_over(hdr, ib);
}

uint32_t icrc_for_flow(const FlowAddr& f, std::span<const uint8_t> ib, const Ipv4Fields& ip) {
  return icrc_for_flow(f, std::span<const std::span<const uint8_t>>(&ib, 1), ip);
}

void icrc_fill(PacketBuf& p, size_t ib_len) {
  icrc_store(p.data + ib_len, icrc_for_flow(p.flow, p.pieces(uint32_t(ib_len))));
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

namespace uroce::wire {

namespace {

// GF(2) polynomials modulo the CRC-32 polynomial P, in the CRC's reflected bit order: bit 31
// holds the coefficient of x^0, bit 0 that of x^31.
constexpr uint32_t kPolyReflected = 0xedb88320;
constexpr uint32_t kOne = 0x80000000;           // x^0
constexpr uint32_t kXInverse = 0xdb710641;      // x^-1: x * (x^31 + (P - x^32 - 1) / x) = P - x^32 + ... = 1

constexpr uint32_t mulmod(uint32_t a, uint32_t b) {
  uint32_t r = 0;
  for (uint32_t bit = kOne; bit; bit >>= 1) {  // a's coefficients of x^0 .. x^31
    if (a & bit) r ^= b;
    b = (b & 1) ? (b >> 1) ^ kPolyReflected : b >> 1;  // b *= x
  }
  return r;
}
static_assert(mulmod(kXInverse, kOne >> 1) == kOne, "x^-1 * x == 1");

// x^(-8 * 2^k) mod P for k = 0..31: shifting a CRC back over 2^k zero bytes.
constexpr std::array<uint32_t, 32> back_shifts() {
  std::array<uint32_t, 32> t{};
  uint32_t x8 = kOne;
  for (int i = 0; i < 8; ++i) x8 = mulmod(x8, kXInverse);
  t[0] = x8;
  for (size_t k = 1; k < t.size(); ++k) t[k] = mulmod(t[k - 1], t[k - 1]);
  return t;
}
constexpr auto kBack = back_shifts();

uint32_t back_over_bytes(uint32_t v, uint64_t n) {
  for (size_t k = 0; n; ++k, n >>= 1)
    if (n & 1) v = mulmod(v, kBack[k]);
  return v;
}

// x^(8 * 2^k) mod P: carrying a CRC difference forward over 2^k bytes.
constexpr std::array<uint32_t, 32> forward_shifts() {
  std::array<uint32_t, 32> t{};
  t[0] = kOne >> 8;  // x^8
  for (size_t k = 1; k < t.size(); ++k) t[k] = mulmod(t[k - 1], t[k - 1]);
  return t;
}
constexpr auto kForward = forward_shifts();
static_assert(mulmod(kForward[0], kBack[0]) == kOne, "x^8 * x^-8 == 1");

uint32_t forward_over_bytes(uint32_t v, uint64_t n) {
  for (size_t k = 0; n; ++k, n >>= 1)
    if (n & 1) v = mulmod(v, kForward[k]);
  return v;
}

// The CRC's linear part over 4 bytes at the start of a message: L(d) = crc(d) ^ crc(0000).
// Over 32 bits it is a bijection; its inverse is built once by Gaussian elimination.
class Linear4 {
 public:
  Linear4() {
    const uint8_t zero[4] = {};
    uint32_t z = crc32_update(0, zero, 4);
    for (int i = 0; i < 32; ++i) {
      uint8_t d[4] = {};
      d[i / 8] = uint8_t(1u << (i % 8));
      uint32_t v = crc32_update(0, d, 4) ^ z, combo = 1u << i;
      for (const Row& r : rows_)
        if (r.value && (v & r.pivot)) v ^= r.value, combo ^= r.combo;
      if (!v) continue;
      uint32_t pivot = 1u << (31 - __builtin_clz(v));
      for (Row& r : rows_)  // keep every row free of the new pivot
        if (r.value & pivot) r.value ^= v, r.combo ^= combo;
      rows_[count_++] = {v, combo, pivot};
    }
  }
  // The 4 bytes d (d[0] in the low byte) with L(d) == u.
  uint32_t solve(uint32_t u) const {
    uint32_t d = 0;
    for (uint32_t i = 0; i < count_; ++i)
      if (u & rows_[i].pivot) d ^= rows_[i].combo;
    return d;
  }

 private:
  struct Row {
    uint32_t value = 0, combo = 0, pivot = 0;
  };
  std::array<Row, 32> rows_{};
  uint32_t count_ = 0;
};

}  // namespace

IcrcMatch icrc_check(const FlowAddr& f, std::span<const uint8_t> pkt, Ipv4Fields& ip) {
  if (pkt.size() < kBthLen + kIcrcLen) return IcrcMatch::Bad;
  auto body = pkt.first(pkt.size() - kIcrcLen);
  Ipv4Fields guess = ip;
  if (!f.v4()) guess.seen = true;  // IPv6 has no header field a UDP socket hides from the ICRC
  if (!guess.seen) guess.flags_frag = 0x4000;  // ip.id: the ID expected (0, or the one after a GRO run's last)
  uint32_t got = icrc_load(pkt.data() + body.size());
  uint32_t diff = icrc_for_flow(f, body, guess) ^ got;
  if (diff == 0) {
    bool seen = guess.seen;
    ip = guess;
    ip.seen = true;
    return seen ? IcrcMatch::Seen : IcrcMatch::Assumed;
  }
  if (guess.seen) return IcrcMatch::Bad;
  // The CRC input: 8 bytes of ones, then the IPv4 header, whose bytes 4..7 (ID, flags and
  // fragment offset) are unknown; after them come 20 + body.size() known bytes.
  static const Linear4 linear;
  uint32_t d = linear.solve(back_over_bytes(diff, 20 + uint64_t(body.size())));
  if (d >> 16) return IcrcMatch::Bad;  // RoCE packets are never fragmented and carry DF: only the ID varies
  ip.id = uint16_t(guess.id ^ ((d & 0xff) << 8 | ((d >> 8) & 0xff)));  // d: how the ID differs from the guess
  ip.flags_frag = 0x4000;
  ip.seen = true;
  return IcrcMatch::Solved;
}

Ipv4IdShift::Ipv4IdShift(size_t ib_len) {
  // The CRC's difference is linear in the ID's: each ID bit's own difference over the 2 ID
  // bytes, carried over the 2 flag bytes, the 12 IP header bytes after them, the UDP header and
  // the IB bytes: a multiplication by x^(8n).
  static const std::array<uint32_t, 16> bit_diff = [] {
    std::array<uint32_t, 16> t{};
    const uint8_t zero[2] = {};
    for (int b = 0; b < 16; ++b) {
      const uint8_t d[2] = {uint8_t((1u << b) >> 8), uint8_t(1u << b)};
      t[size_t(b)] = crc32_update(0, d, 2) ^ crc32_update(0, zero, 2);
    }
    return t;
  }();
  const uint32_t shift = forward_over_bytes(kOne, 2 + 20 + uint64_t(ib_len));
  for (size_t b = 0; b < unit_.size(); ++b) unit_[b] = mulmod(bit_diff[b], shift);
}

uint32_t Ipv4IdShift::operator()(uint32_t icrc, uint16_t id_was, uint16_t id) const {
  for (uint32_t x = uint16_t(id_was ^ id); x; x &= x - 1) icrc ^= unit_[size_t(__builtin_ctz(x))];
  return icrc;
}

}  // namespace uroce::wire

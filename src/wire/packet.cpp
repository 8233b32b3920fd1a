#include "wire/packet.hpp"

#include <cstring>

#include "wire/bytes.hpp"

namespace uroce::wire {

uint64_t rnr_timer_ns(uint8_t code) {
  // Table 45, in units of 10 us; code 0 is the longest (655.36 ms).
  static constexpr uint32_t k10us[32] = {
      65536, 1,    2,    3,    4,    6,    8,     12,    16,    24,    32,
      48,    64,   96,   128,  192,  256,  384,   512,   768,   1024,  1536,
      2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
  return uint64_t(k10us[code & 0x1f]) * 10'000;
}

const char* to_string(ParseError e) {
  switch (e) {
    case ParseError::None: return "ok";
    case ParseError::TooShort: return "packet shorter than its headers";
    case ParseError::UnsupportedOpcode: return "unsupported opcode";
    case ParseError::BadTver: return "transport header version is not 0";
    case ParseError::PayloadNotAllowed: return "payload on an opcode that carries none";
    case ParseError::BadPad: return "pad count larger than the payload";
    case ParseError::BadLength: return "payload length not allowed for this opcode";
  }
  return "?";
}

namespace {
// An XRC packet is handled as the RC one it mirrors, marked xrc (Packet::wire_opcode).
ParseError xrc_to_rc(Packet& out) {
  out.xrc = opcode_info(out.bth.opcode).transport == Transport::XRC;
  if (out.xrc) out.bth.opcode = Opcode(uint8_t(out.bth.opcode) - kXrcBase);
  return ParseError::None;
}
}  // namespace

ParseError decode(std::span<const uint8_t> buf, Packet& out) {
  out.xrc = false;
  if (buf.size() < kBthLen + kIcrcLen) return ParseError::TooShort;
  const uint8_t* p = buf.data();
  if (!opcode_supported(p[0])) return ParseError::UnsupportedOpcode;
  Bth& b = out.bth;
  b.opcode = Opcode(p[0]);
  b.solicited = p[1] & 0x80;
  b.migreq = p[1] & 0x40;
  b.pad = (p[1] >> 4) & 3;
  b.tver = p[1] & 0xf;
  if (b.tver != 0) return ParseError::BadTver;
  b.pkey = read_be16(p + 2);
  b.fecn = p[4] & 0x80;
  b.becn = p[4] & 0x40;
  b.dest_qp = read_be24(p + 5);
  b.ack_req = p[8] & 0x80;
  b.sr = p[8] & 0x40;
  b.place = p[8] & 0x20;
  b.resent = p[8] & 0x10;
  b.psn = Psn(read_be24(p + 9));

  const OpcodeInfo& info = opcode_info(b.opcode);
  if (buf.size() < size_t(info.header_len) + kIcrcLen) return ParseError::TooShort;
  size_t off = kBthLen;
  if (info.headers & kXrcEth) {
    out.xrc_srqn = read_be24(p + off + 1);
    off += kXrcEthLen;
  }
  if (info.headers & kFeth) {
    out.feth = read_be32(p + off);
    off += kFethLen;
  }
  if (info.headers & kDeth) {
    out.deth = {read_be32(p + off), read_be24(p + off + 5)};
    off += kDethLen;
  }
  if (info.headers & kReth) {
    out.reth = {read_be64(p + off), read_be32(p + off + 8), read_be32(p + off + 12)};
    off += kRethLen;
  }
  if (info.headers & kAtomicEth) {
    out.atomic = {read_be64(p + off), read_be32(p + off + 8), read_be64(p + off + 12),
                  read_be64(p + off + 20)};
    off += kAtomicEthLen;
  }
  if (info.headers & kAeth) {
    out.aeth = {p[off], read_be24(p + off + 1)};
    off += kAethLen;
  }
  if (info.headers & kAtomicAckEth) {
    out.atomic_orig = read_be64(p + off);
    off += kAtomicAckEthLen;
  }
  if (info.headers & kImmDt) {
    out.imm = read_be32(p + off);
    off += kImmDtLen;
  }
  if (info.headers & kIeth) {
    out.ieth = read_be32(p + off);
    off += kIethLen;
  }
  if (info.headers & kPlaceEth) {
    out.place = {read_be32(p + off), read_be32(p + off + 4)};
    off += kPlaceEthLen;
  }
  size_t body = buf.size() - off - kIcrcLen;
  if (!(info.flags & kPayload)) {
    // CNPs carry 16 reserved bytes (A17.9.3); every other payload-less opcode carries nothing.
    if (body != 0 && !(info.transport == Transport::CNP && body == 16)) return ParseError::PayloadNotAllowed;
    if (b.pad) return ParseError::BadPad;
    out.payload = {};
    return xrc_to_rc(out);
  }
  if (body % 4 != 0) return ParseError::BadLength;
  if (b.pad > body) return ParseError::BadPad;
  out.payload = buf.subspan(off, body - b.pad);
  return xrc_to_rc(out);
}

size_t encoded_len(const Packet& p) {
  size_t n = p.payload.size();
  return p.header_len() + ((n + 3) & ~size_t(3)) + kIcrcLen;
}

size_t encode_headers(const Packet& pk, uint8_t* p) {
  const Bth& b = pk.bth;
  const OpcodeInfo& info = pk.wire_info();
  p[0] = pk.wire_opcode();
  p[1] = uint8_t((b.solicited ? 0x80 : 0) | (b.migreq ? 0x40 : 0) | (b.pad & 3) << 4 | (b.tver & 0xf));
  write_be16(p + 2, b.pkey);
  p[4] = uint8_t((b.fecn ? 0x80 : 0) | (b.becn ? 0x40 : 0));
  write_be24(p + 5, b.dest_qp);
  p[8] = uint8_t((b.ack_req ? 0x80 : 0) | (b.sr ? 0x40 : 0) | (b.place ? 0x20 : 0) | (b.resent ? 0x10 : 0));
  write_be24(p + 9, b.psn.value());
  size_t off = kBthLen;
  if (info.headers & kXrcEth) {
    write_be32(p + off, pk.xrc_srqn & kQpnMask);  // 8 reserved bits, then the SRQ number
    off += kXrcEthLen;
  }
  if (info.headers & kFeth) {
    write_be32(p + off, pk.feth);
    off += kFethLen;
  }
  if (info.headers & kDeth) {
    write_be32(p + off, pk.deth.qkey);
    p[off + 4] = 0;
    write_be24(p + off + 5, pk.deth.src_qp);
    off += kDethLen;
  }
  if (info.headers & kReth) {
    write_be64(p + off, pk.reth.va);
    write_be32(p + off + 8, pk.reth.rkey);
    write_be32(p + off + 12, pk.reth.dma_len);
    off += kRethLen;
  }
  if (info.headers & kAtomicEth) {
    write_be64(p + off, pk.atomic.va);
    write_be32(p + off + 8, pk.atomic.rkey);
    write_be64(p + off + 12, pk.atomic.swap_add);
    write_be64(p + off + 20, pk.atomic.compare);
    off += kAtomicEthLen;
  }
  if (info.headers & kAeth) {
    p[off] = pk.aeth.syndrome;
    write_be24(p + off + 1, pk.aeth.msn);
    off += kAethLen;
  }
  if (info.headers & kAtomicAckEth) {
    write_be64(p + off, pk.atomic_orig);
    off += kAtomicAckEthLen;
  }
  if (info.headers & kImmDt) {
    write_be32(p + off, pk.imm);
    off += kImmDtLen;
  }
  if (info.headers & kIeth) {
    write_be32(p + off, pk.ieth);
    off += kIethLen;
  }
  if (info.headers & kPlaceEth) {
    write_be32(p + off, pk.place.recv_seq);
    write_be32(p + off + 4, pk.place.pkt);
    off += kPlaceEthLen;
  }
  return off;
}

size_t encode(Packet& pk, uint8_t* out) {
  size_t n = pk.payload.size();
  pk.bth.pad = uint8_t((4 - (n & 3)) & 3);
  size_t off = encode_headers(pk, out);
  if (n && pk.payload.data() != out + off) std::memcpy(out + off, pk.payload.data(), n);  // not built in place
  std::memset(out + off + n, 0, pk.bth.pad);
  return off + n + pk.bth.pad;
}

}  // namespace uroce::wire

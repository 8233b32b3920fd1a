// One RoCEv2 transport packet (the UDP payload: BTH .. payload, pad, ICRC): decode and encode.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/headers.hpp"

namespace uroce::wire {

struct Packet {
  Bth bth;
  Deth deth;
  Reth reth;
  AtomicEth atomic;
  Aeth aeth;
  uint64_t atomic_orig = 0;  // AtomicAckETH
  uint32_t imm = 0;          // ImmDt, as carried on the wire (big-endian value)
  uint32_t ieth = 0;
  PlaceEth place;
  uint32_t feth = 0;         // FETH: placement type (bits 3-0), selectivity level (bits 5-4)
  // XRC: bth.opcode holds the RC opcode (info() is RC's); on the wire it is 0xa0 more, and a
  // request carries an XRCETH naming the XRC SRQ (24 bits).
  bool xrc = false;
  uint32_t xrc_srqn = 0;
  std::span<const uint8_t> payload;  // without pad bytes

  const OpcodeInfo& info() const { return opcode_info(bth.opcode); }
  // The opcode and layout on the wire (XRC's for an XRC packet).
  uint8_t wire_opcode() const { return uint8_t(uint8_t(bth.opcode) + (xrc ? kXrcBase : 0)); }
  const OpcodeInfo& wire_info() const { return kOpcodeTable[wire_opcode()]; }
  // Where the payload starts: BTH and extension headers as sent.
  uint8_t header_len() const { return wire_info().header_len; }
  bool has(uint32_t hdr) const { return info().headers & hdr; }
};

enum class ParseError : uint8_t {
  None, TooShort, UnsupportedOpcode, BadTver, PayloadNotAllowed, BadPad, BadLength,
};
const char* to_string(ParseError e);

// Decodes headers and locates the payload. The trailing 4-byte ICRC is not checked here.
ParseError decode(std::span<const uint8_t> udp_payload, Packet& out);

// Bytes encode() will write (headers + payload + pad + ICRC space).
size_t encoded_len(const Packet& p);
// Writes headers, payload and pad; sets bth.pad. Returns bytes written excluding the ICRC.
size_t encode(Packet& p, uint8_t* out);
// Writes only the headers (BTH + extensions) at out; returns header length.
size_t encode_headers(const Packet& p, uint8_t* out);

}  // namespace uroce::wire

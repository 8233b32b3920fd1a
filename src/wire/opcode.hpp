// BTH opcodes and the per-opcode header layout (IBA 9.2, Table 37), kept as data.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>

namespace uroce::wire {

enum class Opcode : uint8_t {
  // Reliable Connection (0x00..0x1f)
  RC_SEND_FIRST = 0x00, RC_SEND_MIDDLE = 0x01, RC_SEND_LAST = 0x02, RC_SEND_LAST_IMM = 0x03,
  RC_SEND_ONLY = 0x04, RC_SEND_ONLY_IMM = 0x05, RC_WRITE_FIRST = 0x06, RC_WRITE_MIDDLE = 0x07,
  RC_WRITE_LAST = 0x08, RC_WRITE_LAST_IMM = 0x09, RC_WRITE_ONLY = 0x0a, RC_WRITE_ONLY_IMM = 0x0b,
  RC_READ_REQUEST = 0x0c, RC_READ_RESPONSE_FIRST = 0x0d, RC_READ_RESPONSE_MIDDLE = 0x0e,
  RC_READ_RESPONSE_LAST = 0x0f, RC_READ_RESPONSE_ONLY = 0x10, RC_ACKNOWLEDGE = 0x11,
  RC_ATOMIC_ACKNOWLEDGE = 0x12, RC_COMPARE_SWAP = 0x13, RC_FETCH_ADD = 0x14,
  RC_SEND_LAST_INV = 0x16, RC_SEND_ONLY_INV = 0x17,
  // IBA 1.5's memory placement operations (rxe's numbers): FLUSH makes earlier writes to a
  // range visible (or persistent); ATOMIC WRITE stores 8 bytes at once. Both are answered by
  // a READ RESPONSE ONLY without payload.
  RC_FLUSH = 0x1c, RC_ATOMIC_WRITE = 0x1d,
  // Extended Reliable Connection (0xa0..): RC's opcodes plus 0xa0, requests with an XRCETH.
  // Decoding gives the RC opcode and Packet::xrc; encoding adds 0xa0 back.
  XRC_SEND_FIRST = 0xa0,
  // Unreliable Connection (0x20..)
  UC_SEND_FIRST = 0x20, UC_SEND_MIDDLE = 0x21, UC_SEND_LAST = 0x22, UC_SEND_LAST_IMM = 0x23,
  UC_SEND_ONLY = 0x24, UC_SEND_ONLY_IMM = 0x25, UC_WRITE_FIRST = 0x26, UC_WRITE_MIDDLE = 0x27,
  UC_WRITE_LAST = 0x28, UC_WRITE_LAST_IMM = 0x29, UC_WRITE_ONLY = 0x2a, UC_WRITE_ONLY_IMM = 0x2b,
  // Unreliable Datagram (0x60..)
  UD_SEND_ONLY = 0x64, UD_SEND_ONLY_IMM = 0x65,
  // RoCEv2 congestion notification packet (Annex A17.9.3)
  CNP = 0x81,
  // uroce's selective acknowledgement, in the manufacturer-specific range (IBA 9.2: 0xc0..0xff):
  // an ACK for the PSN in its BTH plus which later PSNs arrived. Sent only to requesters that
  // announce selective repeat (Bth::sr), so no other stack ever receives one.
  UROCE_SACK = 0xc1,
  // uroce's SEND under selective repeat: RC_SEND_* (0x00..0x05) plus 0xc8, with a PlaceETH
  // naming the receive WQE and the packet's place in the message, so that a responder can put
  // it into that WQE's buffer while an earlier packet is missing. Only to and from QPs that
  // announce selective repeat.
  UROCE_SEND_FIRST = 0xc8, UROCE_SEND_MIDDLE = 0xc9, UROCE_SEND_LAST = 0xca, UROCE_SEND_LAST_IMM = 0xcb,
  UROCE_SEND_ONLY = 0xcc, UROCE_SEND_ONLY_IMM = 0xcd,
};

enum class Transport : uint8_t { RC = 0, UC = 1, RD = 2, UD = 3, CNP = 4, XRC = 5, Invalid = 7 };

// Which headers follow the BTH, in wire order: XRCETH, FETH, DETH, RETH, AtomicETH, AETH,
// AtomicAckETH, ImmDt, IETH, and uroce's PlaceETH.
enum HdrMask : uint32_t {
  kDeth = 1u << 0, kReth = 1u << 1, kAtomicEth = 1u << 2, kAeth = 1u << 3,
  kAtomicAckEth = 1u << 4, kImmDt = 1u << 5, kIeth = 1u << 6, kPlaceEth = 1u << 7, kFeth = 1u << 8,
  kXrcEth = 1u << 9,
};

// What an opcode means for the requester, completer and responder.
enum OpFlags : uint32_t {
  kFirst = 1u << 0, kMiddle = 1u << 1, kLast = 1u << 2, kOnly = kFirst | kLast,
  kPayload = 1u << 3, kSend = 1u << 4, kWrite = 1u << 5, kRead = 1u << 6,
  kAtomic = 1u << 7, kReadResponse = 1u << 8, kAck = 1u << 9, kRequest = 1u << 10,
  kResponse = 1u << 11, kCarriesImm = 1u << 12,
  kFlush = 1u << 13, kAtomicWrite = 1u << 14,  // answered by an empty READ RESPONSE ONLY
};

struct OpcodeInfo {
  std::string_view name;  // empty: opcode not supported
  Transport transport = Transport::Invalid;
  uint32_t headers = 0;   // HdrMask bits
  uint32_t flags = 0;     // OpFlags bits
  uint8_t header_len = 0; // BTH + extension headers, bytes
};

inline constexpr uint8_t kBthLen = 12, kDethLen = 8, kRethLen = 16, kAtomicEthLen = 28,
                         kAethLen = 4, kAtomicAckEthLen = 8, kImmDtLen = 4, kIethLen = 4,
                         kPlaceEthLen = 8, kFethLen = 4, kXrcEthLen = 4, kIcrcLen = 4;

constexpr uint8_t headers_len(uint32_t h) {
  return uint8_t(kBthLen + (h & kDeth ? kDethLen : 0) + (h & kReth ? kRethLen : 0) +
                 (h & kAtomicEth ? kAtomicEthLen : 0) + (h & kAeth ? kAethLen : 0) +
                 (h & kAtomicAckEth ? kAtomicAckEthLen : 0) + (h & kImmDt ? kImmDtLen : 0) +
                 (h & kIeth ? kIethLen : 0) + (h & kPlaceEth ? kPlaceEthLen : 0) + (h & kFeth ? kFethLen : 0) +
                 (h & kXrcEth ? kXrcEthLen : 0));
}

// XRC's opcodes are RC's plus this (IBA 9.2: 101xxxxx).
inline constexpr uint8_t kXrcBase = 0xa0;

// A SEND opcode as a QP under selective repeat sends it (RC_SEND_FIRST..RC_SEND_ONLY_IMM).
constexpr Opcode placed_send(Opcode rc) { return Opcode(uint8_t(rc) + 0xc8); }

namespace detail {
inline constexpr std::string_view kXrcNames[] = {
    "XRC_SEND_FIRST", "XRC_SEND_MIDDLE", "XRC_SEND_LAST", "XRC_SEND_LAST_IMM", "XRC_SEND_ONLY", "XRC_SEND_ONLY_IMM",
    "XRC_WRITE_FIRST", "XRC_WRITE_MIDDLE", "XRC_WRITE_LAST", "XRC_WRITE_LAST_IMM", "XRC_WRITE_ONLY",
    "XRC_WRITE_ONLY_IMM", "XRC_READ_REQUEST", "XRC_READ_RESPONSE_FIRST", "XRC_READ_RESPONSE_MIDDLE",
    "XRC_READ_RESPONSE_LAST", "XRC_READ_RESPONSE_ONLY", "XRC_ACKNOWLEDGE", "XRC_ATOMIC_ACKNOWLEDGE",
    "XRC_COMPARE_SWAP", "XRC_FETCH_ADD", "", "XRC_SEND_LAST_INV", "XRC_SEND_ONLY_INV", "", "", "", "",
    "XRC_FLUSH", "XRC_ATOMIC_WRITE"};
inline constexpr std::string_view kUroceSendNames[] = {"UROCE_SEND_FIRST", "UROCE_SEND_MIDDLE", "UROCE_SEND_LAST",
                                                       "UROCE_SEND_LAST_IMM", "UROCE_SEND_ONLY", "UROCE_SEND_ONLY_IMM"};

constexpr std::array<OpcodeInfo, 256> make_opcode_table() {
  std::array<OpcodeInfo, 256> t{};
  auto set = [&t](Opcode op, std::string_view name, Transport tr, uint32_t h, uint32_t f) {
    t[uint8_t(op)] = OpcodeInfo{name, tr, h, f, headers_len(h)};
  };
  constexpr uint32_t S = kSend | kPayload | kRequest, W = kWrite | kPayload | kRequest;
  constexpr uint32_t I = kCarriesImm;
  // RC and UC share the request opcodes' layout.
  for (Transport tr : {Transport::RC, Transport::UC}) {
    uint8_t base = tr == Transport::RC ? 0x00 : 0x20;
    bool rc = tr == Transport::RC;
    auto op = [base](uint8_t o) { return Opcode(base + o); };
    set(op(0x00), rc ? "RC_SEND_FIRST" : "UC_SEND_FIRST", tr, 0, S | kFirst);
    set(op(0x01), rc ? "RC_SEND_MIDDLE" : "UC_SEND_MIDDLE", tr, 0, S | kMiddle);
    set(op(0x02), rc ? "RC_SEND_LAST" : "UC_SEND_LAST", tr, 0, S | kLast);
    set(op(0x03), rc ? "RC_SEND_LAST_IMM" : "UC_SEND_LAST_IMM", tr, kImmDt, S | kLast | I);
    set(op(0x04), rc ? "RC_SEND_ONLY" : "UC_SEND_ONLY", tr, 0, S | kOnly);
    set(op(0x05), rc ? "RC_SEND_ONLY_IMM" : "UC_SEND_ONLY_IMM", tr, kImmDt, S | kOnly | I);
    set(op(0x06), rc ? "RC_WRITE_FIRST" : "UC_WRITE_FIRST", tr, kReth, W | kFirst);
    set(op(0x07), rc ? "RC_WRITE_MIDDLE" : "UC_WRITE_MIDDLE", tr, 0, W | kMiddle);
    set(op(0x08), rc ? "RC_WRITE_LAST" : "UC_WRITE_LAST", tr, 0, W | kLast);
    set(op(0x09), rc ? "RC_WRITE_LAST_IMM" : "UC_WRITE_LAST_IMM", tr, kImmDt, W | kLast | I);
    set(op(0x0a), rc ? "RC_WRITE_ONLY" : "UC_WRITE_ONLY", tr, kReth, W | kOnly);
    set(op(0x0b), rc ? "RC_WRITE_ONLY_IMM" : "UC_WRITE_ONLY_IMM", tr, kReth | kImmDt, W | kOnly | I);
  }
  constexpr auto RC = Transport::RC;
  constexpr uint32_t RR = kReadResponse | kPayload | kResponse;
  set(Opcode::RC_READ_REQUEST, "RC_READ_REQUEST", RC, kReth, kRead | kRequest | kOnly);
  set(Opcode::RC_READ_RESPONSE_FIRST, "RC_READ_RESPONSE_FIRST", RC, kAeth, RR | kFirst);
  set(Opcode::RC_READ_RESPONSE_MIDDLE, "RC_READ_RESPONSE_MIDDLE", RC, 0, RR | kMiddle);
  set(Opcode::RC_READ_RESPONSE_LAST, "RC_READ_RESPONSE_LAST", RC, kAeth, RR | kLast);
  set(Opcode::RC_READ_RESPONSE_ONLY, "RC_READ_RESPONSE_ONLY", RC, kAeth, RR | kOnly);
  set(Opcode::RC_ACKNOWLEDGE, "RC_ACKNOWLEDGE", RC, kAeth, kAck | kResponse | kOnly);
  set(Opcode::RC_ATOMIC_ACKNOWLEDGE, "RC_ATOMIC_ACKNOWLEDGE", RC, kAeth | kAtomicAckEth,
      kAck | kAtomic | kResponse | kOnly);
  set(Opcode::RC_COMPARE_SWAP, "RC_COMPARE_SWAP", RC, kAtomicEth, kAtomic | kRequest | kOnly);
  set(Opcode::RC_FETCH_ADD, "RC_FETCH_ADD", RC, kAtomicEth, kAtomic | kRequest | kOnly);
  set(Opcode::RC_SEND_LAST_INV, "RC_SEND_LAST_INV", RC, kIeth, S | kLast);
  set(Opcode::RC_SEND_ONLY_INV, "RC_SEND_ONLY_INV", RC, kIeth, S | kOnly);
  set(Opcode::RC_FLUSH, "RC_FLUSH", RC, kFeth | kReth, kFlush | kRequest | kOnly);
  set(Opcode::RC_ATOMIC_WRITE, "RC_ATOMIC_WRITE", RC, kReth, kAtomicWrite | kPayload | kRequest | kOnly);
  set(Opcode::UD_SEND_ONLY, "UD_SEND_ONLY", Transport::UD, kDeth, S | kOnly);
  set(Opcode::UD_SEND_ONLY_IMM, "UD_SEND_ONLY_IMM", Transport::UD, kDeth | kImmDt, S | kOnly | I);
  set(Opcode::CNP, "CNP", Transport::CNP, 0, 0);
  set(Opcode::UROCE_SACK, "UROCE_SACK", RC, kAeth, kAck | kPayload | kResponse | kOnly);
  for (uint8_t o = 0; o <= 0x1d; ++o) {  // XRC: RC's meaning; its requests name an XRC SRQ
    const OpcodeInfo& rc = t[o];
    if (rc.name.empty()) continue;
    const uint32_t h = rc.headers | (rc.flags & kRequest ? kXrcEth : 0u);
    t[kXrcBase + o] = OpcodeInfo{kXrcNames[o], Transport::XRC, h, rc.flags, headers_len(h)};
  }
  for (uint8_t o = 0; o <= 0x05; ++o) {  // the RC SENDs' meaning, and where they go
    const OpcodeInfo& rc = t[o];
    t[0xc8 + o] = OpcodeInfo{kUroceSendNames[o], RC, rc.headers | kPlaceEth, rc.flags, headers_len(rc.headers | kPlaceEth)};
  }
  return t;
}
}  // namespace detail

inline constexpr std::array<OpcodeInfo, 256> kOpcodeTable = detail::make_opcode_table();

constexpr const OpcodeInfo& opcode_info(Opcode op) { return kOpcodeTable[uint8_t(op)]; }
constexpr bool opcode_supported(uint8_t raw) { return !kOpcodeTable[raw].name.empty(); }

static_assert(headers_len(kReth | kImmDt) == 32);
static_assert(opcode_info(Opcode::RC_WRITE_ONLY_IMM).header_len == 32);
static_assert(opcode_info(Opcode::RC_ATOMIC_ACKNOWLEDGE).header_len == 24);
static_assert(opcode_info(Opcode::RC_COMPARE_SWAP).header_len == 40);
static_assert(opcode_info(Opcode::UROCE_SEND_LAST_IMM).header_len == 24);
static_assert(opcode_info(Opcode::RC_FLUSH).header_len == 32);
static_assert(kOpcodeTable[0xa6].header_len == 32 && kOpcodeTable[0xb1].header_len == 16);  // XRC WRITE FIRST, ACK
static_assert(placed_send(Opcode::RC_SEND_ONLY_IMM) == Opcode::UROCE_SEND_ONLY_IMM);

}  // namespace uroce::wire

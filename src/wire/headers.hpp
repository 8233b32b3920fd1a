// InfiniBand transport headers (IBA 9.2-9.5) as typed values, encoded field by field.
#pragma once
#include <cstdint>
#include <cstring>

#include "wire/opcode.hpp"
#include "wire/psn.hpp"

namespace uroce::wire {

inline constexpr uint16_t kDefaultPKey = 0xffff;
inline constexpr uint32_t kQpnMask = 0xffffff;
inline constexpr uint32_t kGsiQpn = 1;           // QP1: management datagrams (IBA 13.4)
inline constexpr uint32_t kMulticastQpn = 0xffffff;  // the DQPN of every multicast packet (IBA 10.5.2)
inline constexpr uint32_t kGsiQkey = 0x80010000; // the Q_Key every GSI datagram carries (IBA 13.4.6.2)

struct Bth {
  Opcode opcode = Opcode::RC_SEND_ONLY;
  bool solicited = false;
  bool migreq = false;
  uint8_t pad = 0;       // 0..3 bytes of payload padding
  uint8_t tver = 0;      // transport header version, 0
  uint16_t pkey = kDefaultPKey;
  uint32_t dest_qp = 0;  // 24 bits
  bool ack_req = false;
  Psn psn;
  // RoCEv2's congestion marks in the byte before the destination QP (the ICRC masks it):
  // FECN, and BECN, which a CNP carries.
  bool fecn = false, becn = false;
  // A reserved bit of the byte after the destination QP (receivers ignore it, IBA 9.2): set,
  // the requester announces that it takes selective acknowledgements (Opcode::UROCE_SACK).
  bool sr = false;
  // The next reserved bit (a WRITE's packets, selective repeat only): no request before this
  // one that may still be unexecuted touches its bytes, so the responder may place them before
  // those requests execute.
  bool place = false;
  // The next (selective repeat only): a retransmission. Held requests past a hole run when a
  // resend fills it; a first send cannot vouch for what a stranger put ahead of it.
  bool resent = false;
};

// The destination QP of an encoded BTH (bytes 5..7), without decoding the rest.
inline uint32_t bth_dest_qp(const uint8_t* bth) {
  return uint32_t(bth[5]) << 16 | uint32_t(bth[6]) << 8 | bth[7];
}

// The PSN of an encoded BTH (bytes 9..11), read and written in place.
inline uint32_t bth_psn(const uint8_t* bth) { return uint32_t(bth[9]) << 16 | uint32_t(bth[10]) << 8 | bth[11]; }
inline void bth_set_psn(uint8_t* bth, uint32_t psn) {
  bth[9] = uint8_t(psn >> 16);
  bth[10] = uint8_t(psn >> 8);
  bth[11] = uint8_t(psn);
}

// Whether an encoded BTH is that of the k-th packet after `first`'s in a run: every byte the
// same up to the PSN (AckReq included), the PSN k further on.
inline bool bth_follows(const uint8_t* first, const uint8_t* bth, uint32_t k) {
  return std::memcmp(bth, first, 9) == 0 && bth_psn(bth) == ((bth_psn(first) + k) & Psn::kMask);
}

// A UROCE_SACK's payload: one bit per PSN from the one after the BTH's (the first missing,
// always clear) on, set for each PSN the responder holds.
inline constexpr uint32_t kSackPsns = 256;
inline constexpr uint32_t kSackLen = kSackPsns / 8;

struct Reth { uint64_t va = 0; uint32_t rkey = 0; uint32_t dma_len = 0; };
// uroce's PlaceETH (UROCE_SEND_*): which receive WQE the message consumes, counted from the
// connection's first, and which packet of the message this is.
struct PlaceEth { uint32_t recv_seq = 0; uint32_t pkt = 0; };
struct Deth { uint32_t qkey = 0; uint32_t src_qp = 0; };
struct AtomicEth { uint64_t va = 0; uint32_t rkey = 0; uint64_t swap_add = 0; uint64_t compare = 0; };

// AETH syndrome (IBA 9.3.5, Table 44): 3 type bits, then a 5-bit credit count, RNR timer or NAK code.
enum class AethType : uint8_t { Ack = 0, RnrNak = 1, Nak = 3 };
enum class NakCode : uint8_t {
  PsnSequenceError = 0, InvalidRequest = 1, RemoteAccessError = 2, RemoteOperationalError = 3,
  InvalidRdRequest = 4,
};
inline constexpr uint8_t kCreditsInvalid = 0x1f;  // "no credit information", as end-to-end credits are unused

struct Aeth {
  uint8_t syndrome = kCreditsInvalid;
  uint32_t msn = 0;  // 24 bits

  AethType type() const { return AethType(syndrome >> 5); }
  uint8_t value() const { return syndrome & 0x1f; }
  static Aeth ack(uint32_t msn) { return {uint8_t(kCreditsInvalid), msn}; }
  static Aeth rnr_nak(uint32_t msn, uint8_t timer) { return {uint8_t(0x20 | (timer & 0x1f)), msn}; }
  static Aeth nak(uint32_t msn, NakCode c) { return {uint8_t(0x60 | uint8_t(c)), msn}; }
};

// RNR NAK timer field to nanoseconds (IBA Table 45).
uint64_t rnr_timer_ns(uint8_t code);

}  // namespace uroce::wire

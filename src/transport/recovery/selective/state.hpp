// Selective repeat's per-QP state: what the requester was told the responder holds, what the
// responder holds past a hole, and the READ responses the requester placed past a gap.
// transport::Qp keeps these; only recovery/selective/ reads or writes them.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "wire/headers.hpp"
#include "wire/packet.hpp"
#include "wire/psn.hpp"

namespace uroce::transport {

// Selective repeat, the requester's side: which PSNs past una the responder said it holds
// (UROCE_SACK), and how far the current resend goes. `sacked` has bit psn % kSackPsns for the
// PSNs in [una, una + kSackPsns); bits behind una are cleared as una moves.
struct SrSendState {
  std::array<uint64_t, wire::kSackPsns / 64> sacked{};
  wire::Psn limit;        // a resend stops after this PSN and new packets go on from Requester::high
  wire::Psn resent_upto;  // holes up to here were resent since the last timer: once is enough
  wire::Psn highest;      // the highest PSN reported held (stale once una passes it)
  // The last resends went out before any PSN from round_high on: once one of those is reported
  // held, a hole still missing among the resent ones was lost again (the link keeps order).
  wire::Psn round_high;
  bool round = false;
};

// Selective repeat, the responder's side: requests past a hole, kept (one copy) until the hole
// is filled and then executed in PSN order. Allocated when a QP first holds one.
struct HeldRequest {
  bool valid = false;
  // Two different requests came for this PSN past the expected one: neither is trusted, and
  // none is held for it until it is the expected PSN (p.bth.psn says which PSN).
  bool disputed = false;
  wire::Packet p;                // its payload points into `bytes`, its own copy, even when placed
  std::vector<uint8_t> bytes;
};
// A later WRITE whose FIRST packet arrived past a hole with Bth::place: where its MIDDLE
// packets go before its turn.
struct PlacedWrite {
  wire::Psn first;
  uint32_t npkts = 0;  // 0: unused
  uint64_t va = 0;
  uint32_t rkey = 0;
};
struct SrHold {
  std::array<HeldRequest, wire::kSackPsns> slot;  // by psn % kSackPsns (how many: ResponderState::held)
  std::array<PlacedWrite, 8> writes;              // the latest eight, round robin
  uint32_t next_write = 0;
};

// Selective repeat, the requester's READs: responses that arrived past a gap, already written
// into their READ's local buffer, by PSN. Allocated when a QP first places one.
struct SrReadMap {
  static constexpr uint32_t kSpan = 4096;  // PSNs past the first missing response
  std::array<uint64_t, kSpan / 64> got{};
  uint32_t count = 0;
  wire::Psn seen;  // the highest placed (responses before it that are not here were lost)
};

}  // namespace uroce::transport

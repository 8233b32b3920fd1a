// What the hostile selective-repeat tests share: a pair whose A requests from PSN kForgePsnA,
// the stranger's forged request to B, and A's work requests.
#pragma once
#include <algorithm>
#include <span>

#include "core_pair.hpp"

namespace uroce::test {

inline constexpr uint32_t kForgePsnA = 0x100;

// Both QPs under selective repeat (agreed for them), or both go-back-N; timeout 14 (67 ms): a
// recovery faster than 2 ms was not the transport timeout.
inline PairOptions forge_pair(bool sr) {
  PairOptions o;
  o.psn_a = kForgePsnA;
  o.timeout = 14;
  if (sr) o.reliability = transport::Reliability::Sr;
  return o;
}

// A request to B's QP as a third party forges it: A's addresses, B's QPN, a PSN `ahead` of the
// one B expects, the selective-repeat bit set.
inline wire::Packet forged(CorePair& t, wire::Opcode op, uint32_t ahead, std::span<const uint8_t> payload) {
  wire::Packet p;
  p.bth.opcode = op;
  p.bth.dest_qp = t.b.qp->qpn().value();
  p.bth.psn = t.b.qp->resp.epsn + ahead;
  p.bth.sr = true;
  p.payload = payload;
  return p;
}

// One signaled work request of A's over one SGE.
inline Status post(CorePair& t, uint64_t id, WrOpcode op, const uint8_t* local, uint32_t len, uint32_t lkey,
                   uint64_t remote = 0, uint32_t rkey = 0) {
  Sge s{uint64_t(local), len, lkey};
  SendWr w{id, op, kSendSignaled, {&s, 1}};
  w.remote_addr = remote;
  w.rkey = rkey;
  return t.send(t.a, w);
}

inline bool all_are(const uint8_t* p, size_t n, uint8_t v) {
  return std::all_of(p, p + n, [v](uint8_t x) { return x == v; });
}

}  // namespace uroce::test

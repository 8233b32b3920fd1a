// Go-back-N, the IBA's recovery and what rxe and RoCE NICs do: the responder takes requests
// in PSN order only and NAKs the first past a gap (the responder does that itself, C9-91); the
// requester resends everything from the first loss, on a sequence NAK, a gap in the responses
// or its transport timer. Nothing is held, marked or placed.
#pragma once
#include <algorithm>

#include "transport/recovery/recovery.hpp"

namespace uroce::transport::recovery::go_back_n {

// max_inflight_pkts counts packets of the largest MTU (4096): at a smaller path MTU the window
// holds as many bytes in more packets, so a 1500-byte link keeps as much data in flight.
inline uint32_t window(const Context& cx, const Qp& qp) {
  return cx.config().window_pkts(false) * (4096 / std::max<uint32_t>(qp.mtu(), 256));
}
inline bool window_full(const Qp& qp, wire::Psn psn, uint32_t window) {
  return wire::Psn::distance(qp.comp.una, psn) >= window;
}
void on_response_gap(Context& cx, Qp& qp, wire::Psn from);
Verdict on_passed_response(Context& cx);
Verdict on_sack(Context& cx);

}  // namespace uroce::transport::recovery::go_back_n

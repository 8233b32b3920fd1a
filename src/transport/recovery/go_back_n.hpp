// Go-back-N, the IBA's recovery and what rxe and RoCE NICs do: the responder takes requests
// in PSN order only and NAKs the first past a gap (the responder does that itself, C9-91); the
// requester resends everything from the first loss, on a sequence NAK, a gap in the responses
// or its transport timer. Nothing is held, marked or placed.
#pragma once
#include "transport/recovery/recovery.hpp"

namespace uroce::transport::recovery::go_back_n {

inline uint32_t window(const Context& cx) { return cx.config().window_pkts(false); }
inline bool window_full(const Qp& qp, wire::Psn psn, uint32_t window) {
  return wire::Psn::distance(qp.comp.una, psn) >= window;
}
void on_response_gap(Context& cx, Qp& qp, wire::Psn from);
Verdict on_passed_response(Context& cx);
Verdict on_sack(Context& cx);

}  // namespace uroce::transport::recovery::go_back_n

// Go-back-N, the IBA's recovery and what rxe and RoCE NICs do: the responder takes requests
// in PSN order only and NAKs the first past a gap (the responder does that itself, C9-91); the
// requester resends everything from the first loss, on a sequence NAK, a gap in the responses
// or its transport timer. Nothing is held, marked or placed.
#pragma once
#include "transport/recovery/recovery.hpp"
#include "wire/mtu.hpp"

namespace uroce::transport::recovery::go_back_n {

// max_inflight_pkts counts packets of MTU 4096: the same bytes in more packets at a smaller path
// MTU. An RC peer the link carries intact (a same-host ring) has a window of its own (UD and
// UC keep no packets in flight: nothing to look up).
inline uint32_t window(const Context& cx, const Qp& qp) {
  const CoreConfig& c = cx.config();
  if (c.intact_window_pkts && qp.type() == QpType::RC && c.carried_intact &&
      c.carried_intact(qp.flow.dst, qp.attr().dest_qp_num))
    return c.intact_window_pkts;
  return wire::packets_at_mtu(c.window_pkts(false), qp.mtu());
}
inline bool window_full(const Qp& qp, wire::Psn psn, uint32_t window) {
  return wire::Psn::distance(qp.comp.una, psn) >= window;
}
void on_response_gap(Context& cx, Qp& qp, wire::Psn from);
Verdict on_passed_response(Context& cx);
Verdict on_sack(Context& cx);

}  // namespace uroce::transport::recovery::go_back_n

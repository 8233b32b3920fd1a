#include "transport/recovery/go_back_n.hpp"

#include "transport/roles.hpp"

namespace uroce::transport::recovery::go_back_n {

void on_response_gap(Context& cx, Qp& qp, wire::Psn from) { requester_go_back(cx, qp, from); }

Verdict on_passed_response(Context& cx) {
  ++cx.ctr().rx_duplicate;  // responses come in order: one already taken is a repeat
  return Verdict::Stale;
}

Verdict on_sack(Context& cx) {
  ++cx.ctr().rx_bad_opcode;  // never asked for: not an answer of ours
  return Verdict::Unexpected;
}

}  // namespace uroce::transport::recovery::go_back_n

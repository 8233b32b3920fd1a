// Selective repeat's implementation of the recovery seam (recovery.hpp), for recovery.cpp
// alone: the roles never call these. Responder: hold.cpp; requester and its timers:
// sender.cpp; the requester's READs: reads.cpp.
#pragma once
#include <cstdint>

#include "transport/context.hpp"
#include "transport/qp_transport.hpp"
#include "transport/verdict.hpp"
#include "wire/packet.hpp"

namespace uroce::transport {

// ---- responder (hold.cpp) ----
// Whether p, past the expected PSN, is held: the requester takes part and announces it.
bool sr_holds(const Qp& qp, const wire::Packet& p);
Verdict sr_hold(Context& cx, Qp& qp, const wire::Packet& p);
bool sr_holding(const Qp& qp);
// A request at the expected PSN drops a different one held there and settles its dispute.
void sr_conflicts(Context& cx, Qp& qp, const wire::Packet& p);
// After a request: the requester's announcement is learned; held requests the responder has
// passed are forgotten and, after a resend filled a hole, those now in sequence run.
void sr_after_request(Context& cx, Qp& qp, const wire::Packet& p, Verdict v, wire::Psn from, uint64_t now);
bool sr_takes_opcode(const Qp& qp, const wire::Packet& p);
bool sr_takes_partial_read(const Qp& qp, const wire::Packet& p);
void sr_mark_answer(const Qp& qp, wire::Packet& p);
void sr_send_sack(Context& cx, Qp& qp, wire::Psn acked);

// ---- requester and completer (sender.cpp) ----
bool sr_sacked(const Qp& qp, wire::Psn psn);
uint32_t sr_sacked_count(const Qp& qp);  // PSNs past una reported held: out of the network
void sr_mark(Qp& qp, wire::Psn psn, bool held);
void sr_forget(Qp& qp, wire::Psn from, wire::Psn to);
bool sr_holds_any(const Qp& qp);  // a PSN past una reported held (SrSendState::highest is current)
uint32_t sr_window(const Context& cx);
bool sr_window_full(const Qp& qp, wire::Psn psn, uint32_t window);
bool sr_placeable(Qp& qp, const verbs::SendWqe& w);
void sr_shape_send(const Qp& qp, const verbs::SendWqe& w, uint32_t k, wire::Packet& p);
void sr_mark_request(const Qp& qp, const verbs::SendWqe& w, wire::Psn psn, wire::Packet& p);
bool sr_skips(const Qp& qp, wire::Psn psn, bool& stop);  // a resend reaching psn
void sr_on_go_back(Qp& qp);
void sr_on_response_gap(Context& cx, Qp& qp, wire::Psn from, wire::Psn upto);
void sr_on_plain_ack(Qp& qp);
Verdict sr_on_sack(Context& cx, Qp& qp, const wire::Packet& p, bool& progress);
void sr_on_una_moved(Qp& qp, const wire::Packet& p, wire::Psn before);
uint64_t sr_probe_interval(const Context& cx, const Qp& qp);
void sr_probe(Context& cx, Qp& qp);
void sr_on_timeout(Qp& qp, wire::Psn from);

// ---- the requester's READs (reads.cpp) ----
bool sr_reads_placed(const Qp& qp);  // some response waits for a gap before it
bool sr_read_got(const Qp& qp, wire::Psn psn);
void sr_read_set(Qp& qp, wire::Psn psn);
bool sr_read_take(Qp& qp, wire::Psn psn);
// Asks again for the missing responses of every READ whose PSNs fall in [from, to), each run
// of them apart.
void sr_reask_reads(Context& cx, Qp& qp, wire::Psn from, wire::Psn to);
void sr_advance_placed(Context& cx, Qp& qp, bool& progress);
Verdict sr_place_read_response(Context& cx, Qp& qp, const wire::Packet& p);
Verdict sr_on_passed_response(Context& cx, Qp& qp, verbs::SendWqe& w, const wire::Packet& p);
// The PSN after the last READ the responder is known to have executed (parts of those may be
// asked for again).
wire::Psn sr_answered_upto(Qp& qp, const verbs::SendWqe& w);

}  // namespace uroce::transport

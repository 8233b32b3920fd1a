// Loss recovery behind one seam: the points where a role meets a gap, a sequence NAK, a
// timeout, a SACK, a packet ahead of the expected PSN, or the window. Each QP's recovery is
// chosen once (CoreConfig::reliability, or the QP's own choice): go-back-N (go_back_n.cpp, the
// IBA behaviour, what rxe and NICs do) or selective repeat (selective/, after IRN). The roles
// call these and never look at what either keeps (as quinn-proto's congestion Controller,
// with its algorithms beside it). What the roles do themselves stays IBA's: the responder's
// PSN-sequence NAK, the completer's implied NAKs, the requester's go-back.
#pragma once
#include <cstdint>

#include "transport/context.hpp"
#include "transport/qp_transport.hpp"
#include "transport/verdict.hpp"
#include "wire/packet.hpp"

namespace uroce::transport::recovery {

// A QP's recovery, afresh (when it is made, reset, or its choice set before it talks): `sr`
// is chosen for it; `agreed`: with its peer (ECE, ConnectOptions), not only for the device.
void start(Qp& qp, bool sr, bool agreed);

// ---- responder ----
// A request past the expected PSN: true if recovery keeps it (hold); false, IBA's sequence
// NAK (C9-91).
bool holds(const Qp& qp, const wire::Packet& p);
Verdict hold(Context& cx, Qp& qp, const wire::Packet& p);
// The request at the expected PSN, before it runs; and after it ran with verdict v (`from`:
// the expected PSN before it).
void on_in_sequence(Context& cx, Qp& qp, const wire::Packet& p);
void after_request(Context& cx, Qp& qp, const wire::Packet& p, Verdict v, wire::Psn from, uint64_t now);
// Go-back-N: requests run in PSN order and nothing is held past a hole.
bool in_order(const Qp& qp);
// Whether the QP takes a request of this opcode at all (uroce's own SEND opcodes).
bool takes_opcode(const Qp& qp, const wire::Packet& p);
// Whether a duplicate READ may ask for whole packets of an executed READ's middle.
bool takes_partial_read(const Qp& qp, const wire::Packet& p);
// An answer (ACK, SACK, READ response, atomic ACK) about to leave: recovery's marks on it.
void mark_answer(const Qp& qp, wire::Packet& p);
// The coalesced acknowledgement is a selective one (send_sack builds it).
bool acks_selectively(const Qp& qp);
void send_sack(Context& cx, Qp& qp, wire::Psn acked);

// ---- requester ----
// Packets from una on the QP may have out, and whether psn may go out under that window.
uint32_t window(const Context& cx, const Qp& qp);
bool window_full(const Qp& qp, wire::Psn psn, uint32_t window);
// A WRITE given its PSNs: whether the responder may place it before what comes before it.
bool placeable(Qp& qp, const verbs::SendWqe& w);
// A SEND's packet k as recovery sends it (opcode, PlaceETH), before its payload goes in.
void shape_send(const Qp& qp, const verbs::SendWqe& w, uint32_t k, wire::Packet& p);
// A request about to leave (psn below Requester::high: a resend): recovery's marks on it.
void mark_request(const Qp& qp, const verbs::SendWqe& w, wire::Psn psn, wire::Packet& p);
// A resend reaching psn: send it, skip this packet, or stop resending (new packets go on).
enum class Resend : uint8_t { Send, SkipPacket, StopHere };
Resend on_resend(const Qp& qp, wire::Psn psn);
// The requester went back: a resend runs from there.
void on_go_back(Qp& qp);

// ---- completer ----
// A gap in the responses from `from` (implied NAK, IBA 9.7.5.1.5); every response before
// `upto` was sent. Recovery resends what it must.
void on_response_gap(Context& cx, Qp& qp, wire::Psn from, wire::Psn upto);
// READ responses past a gap are placed at once (and parts of a READ asked for again).
bool places_reads(const Qp& qp);
Verdict place_read_response(Context& cx, Qp& qp, const wire::Packet& p);
// A response for a PSN of the head READ already taken; and one taken in order at psn.
Verdict on_passed_response(Context& cx, Qp& qp, verbs::SendWqe& w, const wire::Packet& p);
void on_response_taken(Qp& qp, wire::Psn psn);
// Whether a response may stand anywhere in a READ's stream (the answer to a re-asked part).
bool any_read_position(const Qp& qp);
// The responder asks for psn again (RNR NAK, PSN-sequence NAK): what it said it held is stale.
void on_rewind(Qp& qp, wire::Psn psn);
// A plain ACK, and a SACK (recovery checks it is an answer at all).
void on_plain_ack(Qp& qp);
Verdict on_sack(Context& cx, Qp& qp, const wire::Packet& p, bool& progress);
// After an answer was taken: responses placed past a gap complete what they can.
void after_answer(Context& cx, Qp& qp, bool& progress);
// una moved from `before` on answer p.
void on_una_moved(Qp& qp, const wire::Packet& p, wire::Psn before);

// ---- timers ----
// How long after the last progress the QP probes, before its transport timer; 0: never.
uint64_t probe_interval(const Context& cx, const Qp& qp);
// The probe fired (the transport timer has not).
void probe(Context& cx, Qp& qp);
// The transport timer fired: the requester goes back to `from`.
void on_timeout(Qp& qp, wire::Psn from);

}  // namespace uroce::transport::recovery

// The three roles of a QP in the InfiniBand transport (IBA 9.7): requester (send queue ->
// request packets), completer (ACKs and responses -> send completions), responder (requests ->
// memory, receive completions, ACKs and responses). Each sees the protocol core only through
// Context; the core calls them from receive dispatch and its progress pass.
#pragma once
#include <cstdint>

#include "transport/qp_transport.hpp"
#include "transport/context.hpp"
#include "transport/verdict.hpp"
#include "transport/wr_traits.hpp"
#include "wire/packet.hpp"

namespace uroce::transport {

// Sends new or retransmitted requests within the window. Returns true if it has more to send now.
bool requester_run(Context& cx, Qp& qp, uint64_t now, uint32_t& budget);
// UD: sends one WQE as a datagram and completes it. False if no packet buffer was free.
bool requester_send_datagram(Context& cx, Qp& qp, verbs::SendWqe& w, uint32_t idx);
// Go-back-N: the next request sent is the one carrying `psn`.
void requester_go_back(Context& cx, Qp& qp, wire::Psn psn);

Verdict completer_on_response(Context& cx, Qp& qp, const wire::Packet& p, uint64_t now);
// The transport timer or a probe fired (retransmit.cpp).
void completer_on_timer(Context& cx, Qp& qp, uint64_t now);
// The oldest send WQE not completed, if it was given PSNs or failed; completing it with st
// ends the QP (ERR).
verbs::SendWqe* completer_head(Qp& qp);
void completer_fatal(Context& cx, Qp& qp, WcStatus st);
// Completes a WQE the requester rejected once every WQE before it has completed.
void completer_retire_failed(Context& cx, Qp& qp);

// A request from the QP's peer; with selective repeat, held requests it makes sequential follow.
Verdict responder_on_request(Context& cx, Qp& qp, const wire::Packet& p, uint64_t now);
// One request, checked and executed in sequence (or answered as a duplicate, held, NAKed).
Verdict responder_execute(Context& cx, Qp& qp, const wire::Packet& p, uint64_t now);
// Sends queued READ responses, atomic ACKs and ACKs in PSN order. True if more remain.
bool responder_run(Context& cx, Qp& qp, uint32_t& budget);
// Sends the coalesced ACK for this QP (or queues it behind pending responses).
void responder_flush_ack(Context& cx, Qp& qp);
// Whether a request may come next in the message stream: opcode sequence and length (IBA
// 9.7.5.2.3-4); the responder NAKs one that does not, in its turn.
bool fits_in_sequence(const Qp& qp, const wire::Packet& p);
// An answer of the responder's (ACK, SACK, READ response, atomic ACK): BTH for the peer's QP.
wire::Packet response_to(const Qp& qp, wire::Opcode op, wire::Psn psn);

// UD: one datagram into the next receive WQE, after the GRH area (IBA 9.8.4, 11.4.1.2).
void responder_on_datagram(Context& cx, Qp& qp, const wire::Packet& p, const wire::FlowAddr& from,
                           const wire::Ipv4Fields& ip);

// READ and atomics: the WQEs that wait for response data and count against max_rd_atomic.
inline bool is_rd_atomic(WrOpcode op) { return traits(op).rd_atomic(); }

// Packets a message of len bytes takes at this MTU: a zero-length one still takes one.
inline uint32_t packets_for(uint32_t len, uint32_t mtu) { return len == 0 ? 1 : (len + mtu - 1) / mtu; }

// Congestion notification: a request that arrived CE-marked (the QP's notification point may
// answer with a CNP), and a CNP that arrived for the QP.
void congestion_on_marked_request(Context& cx, Qp& qp, const wire::Packet& p, uint64_t now);
void congestion_on_cnp(Context& cx, Qp& qp, uint64_t now);
// A paced QP (one with a RateControl): true if its next packet may leave now; if not, its
// timer is armed for when it may. paced_send() books a packet that left.
bool pace(Context& cx, Qp& qp, uint64_t now);
void paced_send(Qp& qp, uint32_t bytes, uint64_t now);

// Selective repeat (selective.cpp). Responder: holds a request past the expected PSN from a
// requester that takes selective repeat (ResponderState::sr); two different ones for one PSN
// conflict (neither kept, that PSN taken only in its turn); a request at the expected PSN drops
// a different one held there (sr_conflicts) and settles its dispute; forgets held requests
// the responder has passed (`from`: the expected PSN before the last request) and, after a
// resend filled a hole (`run`), executes the held ones now in sequence; sends a selective ACK
// for `acked`.
Verdict sr_hold(Context& cx, Qp& qp, const wire::Packet& p);
bool sr_holding(const Qp& qp);
void sr_conflicts(Context& cx, Qp& qp, const wire::Packet& p);
void sr_release(Context& cx, Qp& qp, wire::Psn from, uint64_t now, bool run);
void sr_send_sack(Context& cx, Qp& qp, wire::Psn acked);
// Requester: whether the responder reported psn held; marking (nothing under go-back-N) and
// forgetting such reports.
bool sr_sacked(const Qp& qp, wire::Psn psn);
// PSNs past una the responder reported held: out of the network, so out of the window.
uint32_t sr_sacked_count(const Qp& qp);
void sr_mark(Qp& qp, wire::Psn psn, bool held);
void sr_forget(Qp& qp, wire::Psn from, wire::Psn to);
// True if the responder reported a PSN past una held (SrSendState::highest is current).
bool sr_holds_any(const Qp& qp);
// Requester, READs: responses already placed past a gap, by PSN (take: forgets one, true if it
// was there); asking again for the missing responses of every READ whose PSNs fall in [from, to),
// each run of them apart.
bool sr_reads_placed(const Qp& qp);  // some response waits for a gap before it
bool sr_read_got(const Qp& qp, wire::Psn psn);
void sr_read_set(Qp& qp, wire::Psn psn);
bool sr_read_take(Qp& qp, wire::Psn psn);
void sr_reask_reads(Context& cx, Qp& qp, wire::Psn from, wire::Psn to);
// When the QP's timer fires after its last progress: its `timeout` attribute, or first, under
// selective repeat, the tail-loss probe's. start_retransmit_timer runs it from now.
uint64_t retransmit_timeout(const Context& cx, const Qp& qp);
void start_retransmit_timer(Context& cx, Qp& qp, uint64_t now);
void stop_retransmit_timer(Qp& qp);

// Starts a packet to the QP's peer; headers are written by the caller.
PacketBuf* start_packet(Context& cx, const Qp& qp);
// Encodes p into tx (headers, payload, pad) and emits it with its ICRC.
void send_packet(Context& cx, PacketBuf* tx, wire::Packet& p);

}  // namespace uroce::transport

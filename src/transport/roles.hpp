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
bool requester_send_frame(Context& cx, Qp& qp, verbs::SendWqe& w, uint32_t idx);  // raw.cpp
// A WQE that cannot be carried out ends with st, and the QP with it (requester.cpp).
void fail_wqe(Context& cx, Qp& qp, verbs::SendWqe& w, WcStatus st);
// Go-back-N: the next request sent is the one carrying `psn`.
void requester_go_back(Context& cx, Qp& qp, wire::Psn psn);

Verdict completer_on_response(Context& cx, Qp& qp, const wire::Packet& p, uint64_t now);
// The transport timer or a probe fired (retransmit.cpp).
void completer_on_timer(Context& cx, Qp& qp, uint64_t now);
// The oldest send WQE not completed, if it was given PSNs or failed; completing it with st
// ends the QP (ERR).
verbs::SendWqe* completer_head(Qp& qp);
void completer_fatal(Context& cx, Qp& qp, WcStatus st);
// Retires the WQEs an (explicit or implied) ACK of `acked` completes; false if a READ/atomic
// before it misses responses (implied NAK, IBA 9.7.5.1.5), asked for again if `retry`.
bool completer_retire(Context& cx, Qp& qp, wire::Psn acked, bool& progress, bool retry = true);
// Retransmits from the first missing response (recovery says what), once per gap.
void completer_gap_retry(Context& cx, Qp& qp, wire::Psn from, wire::Psn upto);
// Whether a READ response fits at position k of READ w (opcode and length).
bool read_response_fits(const Qp& qp, const verbs::SendWqe& w, uint32_t k, const wire::Packet& p);
// Completes a WQE the requester rejected once every WQE before it has completed.
void completer_retire_failed(Context& cx, Qp& qp);

// A request from the QP's peer; with selective repeat, held requests it makes sequential follow.
Verdict responder_on_request(Context& cx, Qp& qp, const wire::Packet& p, uint64_t now);
// A run of n MIDDLE packets (wire::ApartPayload; p: the first's headers and all n payloads)
// executed at once, if that is the same as executing them one by one: false if not, with
// nothing done but, for a SEND whose scatter fails part way, bytes the packets one by one
// write again (responder_run.cpp).
bool responder_take_run(Context& cx, Qp& qp, const wire::Packet& p, uint32_t n);
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
// A packet for the QP's own counters.
inline void count_rx(Qp& q, size_t bytes) {
  ++q.stats.rx_packets;
  q.stats.rx_bytes += bytes;
}
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

// The transport timer (and recovery's probe before it), from now after the last progress;
// stopped when nothing is outstanding.
void start_retransmit_timer(Context& cx, Qp& qp, uint64_t now);
void stop_retransmit_timer(Qp& qp);

// Starts a packet to the QP's peer; headers are written by the caller.
PacketBuf* start_packet(Context& cx, const Qp& qp);
// Encodes p into tx (headers, payload, pad) and emits it with its ICRC.
void send_packet(Context& cx, PacketBuf* tx, wire::Packet& p);

}  // namespace uroce::transport

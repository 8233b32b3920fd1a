// What the transport keeps per QP: the state of its requester, completer and responder (IBA
// 9.7), selective repeat's, congestion control's, and the engine's scheduling marks, on top of
// the verbs QP (attributes, state machine, work queues). The protocol core makes and owns these;
// the roles work on them.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "cc/dcqcn.hpp"
#include "cc/pacer.hpp"
#include "cc/rate_control.hpp"
#include "transport/recovery/selective/state.hpp"
#include "transport/rtt.hpp"
#include "transport/timers.hpp"
#include "verbs/qp.hpp"
#include "wire/ip_udp.hpp"
#include "wire/packet.hpp"
#include "wire/psn.hpp"

namespace uroce::transport {

using verbs::Rkey;

// Requester: turns send WQEs into request packets (IBA 9.7.4-9.7.5).
struct RequesterState {
  uint32_t next = 0;       // SQ index of the WQE being sent
  uint32_t pkt = 0;        // packet index within that WQE
  wire::Psn psn;           // next new PSN to assign
  wire::Psn high;          // one past the highest PSN ever sent (to tell retransmissions apart)
  uint32_t rd_atomic_out = 0;  // outstanding READ/atomic WQEs (max_rd_atomic)
  uint32_t recv_seq = 0;   // receive WQEs the WQEs assigned so far consume at the responder
  bool paced = false;      // a rate control or limit: packets wait for the pacer (a flag in a hot line)
  uint64_t ack_asked_at = 0;  // when a request last asked for an ACK (paced QPs)
  bool pace_waited = false;   // a packet waited for the pacer since the send queue was last empty
  bool sr = false;         // selective repeat: announced on every request; resends skip what the peer holds
  // The peer takes it too (agreed for this QP, or shown by its first answer): SENDs carry a PlaceETH and
  // a READ asks again for only the responses it lacks. A device-wide choice alone may face any
  // stack, which would drop uroce's SEND opcodes and answer such READs its own way.
  bool peer_sr = false;
  // peer_sr is known: agreed for the QP, or read from the first answer that acknowledged a
  // request (a responder that takes part marks its answers). Never from a later packet: one
  // forged SACK would otherwise switch a QP to opcodes its peer does not take.
  bool peer_settled = false;
};

// Completer: matches ACKs and responses to WQEs and generates send completions (IBA 9.7.5.1).
// How the requester last went back, since the completer last saw progress.
enum class Rewind : uint8_t {
  None,        // no go-back since the last progress
  Rewound,     // went back to rewound_to: a sequence NAK for that PSN reports nothing new
  GapRetried,  // went back for a gap in the responses: no second gap retry before progress
};

// A fatal NAK for psn arrived while a READ/atomic before it still missed responses: those may
// yet arrive (reordered), but the responder is gone and nothing is retried. Once everything
// before psn has completed (or the transport timer fires), the QP ends with status.
struct PendingFatal {
  wire::Psn psn;
  WcStatus status = WcStatus::Success;
};

struct CompleterState {
  wire::Psn una;               // oldest PSN not yet acknowledged
  uint8_t retry_left = 7;
  uint8_t rnr_left = 7;
  uint64_t retrans_armed_at = 0;  // when the transport timer started (probes run until it fires)
  Rewind rewind = Rewind::None;
  wire::Psn rewound_to;
  uint8_t probes = 0;  // selective repeat's probes since the last progress (each waits twice as long)
  std::optional<PendingFatal> fatal;
};

// Responder: executes incoming requests and answers them (IBA 9.7.5.2, 9.7.6).
enum class RespMsg : uint8_t { None, Send, Write };

// Where the responder stands in the request stream (IBA 9.7.5.2, 9.8.3).
enum class RespSeq : uint8_t {
  InSequence,  // taking the request at epsn
  NakSent,     // a PSN sequence NAK went out for epsn; the rest of the gap is dropped silently
  UcDropping,  // UC: dropping the rest of a damaged message until its next FIRST or ONLY
  Dying,       // a fatal NAK waits behind queued responses; nothing more is taken
};

enum class RespJobKind : uint8_t { Read, AtomicAck, Aeth, Sack };

struct RespJob {  // responses leave in PSN order: READ data, atomic ACKs, and ACK/NAKs behind them
  RespJobKind kind = RespJobKind::Read;
  uint8_t aeth_syndrome = 0;
  bool dup = false;         // answers a duplicate request: not counted against max_dest_rd_atomic
  bool fatal = false;       // a NAK after which the QP goes to ERR (sent behind earlier responses)
  wire::Psn psn;
  uint64_t va = 0;
  Rkey rkey;
  uint32_t len = 0;
  uint32_t sent = 0;        // bytes of the READ response already sent
  uint64_t atomic_orig = 0;
  verbs::PdHandle pd;       // the PD its READ is checked against (an XRC target's changes)
};

// A READ, atomic, FLUSH or ATOMIC WRITE the responder executed (IBA 9.7.5.1, 9.7.6.1.4). The
// last max_dest_rd_atomic are kept: a duplicate is answered from what was asked then, never
// from what the duplicate says, and an atomic or ATOMIC WRITE is never executed twice.
enum class ResKind : uint8_t { Read, Atomic, Placement };

struct RdAtomicResource {
  bool valid = false;
  ResKind kind = ResKind::Read;
  wire::Psn psn;         // first PSN
  uint32_t npkts = 1;    // PSNs it spans
  uint64_t va = 0;
  Rkey rkey;
  uint32_t len = 0;
  uint64_t orig = 0;     // atomic: the value it returned; FLUSH: its FETH; ATOMIC WRITE: its bytes
  verbs::PdHandle pd;    // the PD it was executed in (an XRC target's changes per message)
};

// A SEND to a QP of a tag matching SRQ (tag_matching.cpp): what its TMH made of it.
// Plain: no TMH to read (shorter than one, or an opcode not known): an ordinary receive.
enum class TmKind : uint8_t { None, Plain, NoTag, Unexpected, Eager, Rndv };
struct TmMessage {
  TmKind kind = TmKind::None;
  uint32_t app_ctx = 0;
  uint64_t tag = 0;
  uint64_t rvh_va = 0;  // Rndv: the sender's data
  uint32_t rvh_rkey = 0;
  uint32_t rvh_len = 0;
};

// A rendezvous this QP's requester carries out for its tag matching SRQ: the READ of the
// sender's data into the tag's buffer, then the FIN. Completed in order, as posted.
struct TmRendezvous {
  uint64_t recv_wr_id = 0;
  uint32_t len = 0;
};

struct ResponderState {
  wire::Psn epsn;          // next expected request PSN
  wire::Msn msn;           // messages completed
  RespMsg msg = RespMsg::None;
  RespSeq seq = RespSeq::InSequence;
  bool ack_pending = false;
  bool in_ack_list = false;
  // Selective repeat taken from this requester: the QP chose it, and the requester agreed to
  // it or announced it on a request taken in sequence. Only then are its bits and uroce's
  // opcodes honoured, requests held past a hole and SACKs sent; and answers carry the bit.
  bool sr = false;
  // The request being executed is on trial (recovery held it past a hole): one that would be
  // rejected in its turn is dropped instead of NAKed, and its requester's resend, taken in
  // sequence, gets the NAK. A stranger's held request can then never end the connection.
  bool on_trial = false;
  // Requests held past a hole (selective repeat, Qp::sr_hold): counted here, in a line every
  // request touches anyway, so a QP holding nothing never reads the cold hold.
  uint16_t held = 0;
  uint16_t disputed = 0;  // slots of the hold disputed (HeldRequest::disputed)
  // Current SEND message: the receive WQE taken for it (the recv_taken'th, from 1), and
  // its first PSN (where a packet goes follows from its PSN).
  bool have_recv = false;
  wire::Psn msg_first;
  uint32_t recv_taken = 0;
  uint64_t recv_wr_id = 0;
  uint32_t recv_len = 0;   // capacity of its SGEs
  uint32_t recv_offset = 0;
  std::vector<Sge> recv_sges;
  TmMessage tm;
  // Current WRITE message.
  uint64_t write_va = 0;
  Rkey write_rkey;
  uint32_t write_len = 0;  // RETH DMA length
  uint32_t write_offset = 0;
  std::deque<RespJob> jobs;
  std::vector<RdAtomicResource> resources;  // ring of max_dest_rd_atomic entries
  uint32_t resource_next = 0;
};

// What one QP sent and received, as `rdma statistic` shows per QP: for the uroce command. A
// packet counts toward its QP once it passed the checks that make it the QP's (ICRC, P_Key,
// opcode, source, state).
struct QpCounters {
  uint64_t tx_packets = 0, tx_bytes = 0, rx_packets = 0, rx_bytes = 0;
  uint64_t retransmitted_packets = 0, retransmit_timeouts = 0;
  uint64_t tx_naks = 0, rx_naks = 0, tx_rnr_naks = 0, rx_rnr_naks = 0, tx_cnps = 0, rx_cnps = 0;
};

struct Qp : verbs::Qp {
  using verbs::Qp::Qp;

  RequesterState req;
  CompleterState comp;
  ResponderState resp;
  wire::FlowAddr flow;          // our address to the peer's, ports included

  // Engine-private scheduling flags (the doorbell is sq.doorbell).
  // Its peer is a device on this host reached through shared memory: transmitting costs no
  // system call, so a post runs the device at once (set by the API at RTR).
  std::atomic<bool> same_host{false};
  bool active = false;          // on the engine's run list
  uint8_t prio = 0;             // the run list's priority it is on (TxScheduler)
  bool flush_pending = false;   // entered ERR: flush both queues
  uint64_t timer_queued = 0;    // deadline of this QP's entry in the timer heap, 0 if none
  TimerTable timers;

  // Congestion control, after everything else: the hot lines above keep their layout.
  cc::DcqcnNp np{50'000};  // answers CE-marked requests with CNPs (interval: CoreConfig's)
  // The sender's congestion control and pacer (RC/UC, when the device has one; else null).
  std::unique_ptr<cc::RateControl> rate;
  cc::Pacer pacer;
  // The rate limit the program set (ProtocolCore::set_rate_limit): bits per second (0: none).
  double limit_bps = 0;
  uint32_t limit_burst = 0;  // bytes that may leave back to back after an idle time
  QpCounters stats;
  std::optional<bool> sr_choice;  // selective repeat chosen for this QP; unset: the device's default
  std::optional<cc::Algo> cc_choice;  // congestion control chosen for this QP; unset: the device's
  SrSendState sr_send;
  std::unique_ptr<SrHold> sr_hold;
  std::unique_ptr<SrReadMap> sr_read;
  RttEstimator rtt;
  uint32_t xrcd = 0;  // an XRC target QP's domain: the XRC SRQs its requests may name
  // An RSS QP (raw packet): each frame's hash picks its work queue from this table.
  struct Rss {
    std::vector<verbs::Srq*> table;
    RxHash hash;
  };
  std::unique_ptr<Rss> rss;
  std::deque<TmRendezvous> tm_rndv;  // READs posted for rendezvous, oldest first
};

// The transport's QP behind a verbs QP (every QP the protocol core makes is one).
inline Qp& of(verbs::Qp& q) { return static_cast<Qp&>(q); }
inline const Qp& of(const verbs::Qp& q) { return static_cast<const Qp&>(q); }

// Transport timeout for the `timeout` attribute (IBA 9.7.6.1.3): 4.096 us * 2^timeout; 0 means
// infinite.
inline uint64_t transport_timeout_ns(uint8_t timeout) {
  if (timeout == 0) return 0;
  return uint64_t(4096) << (timeout > 31 ? 31 : timeout);
}

}  // namespace uroce::transport

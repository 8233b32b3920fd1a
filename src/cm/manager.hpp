// The communication manager of one port (IBA 12.9), sans I/O: it takes received MADs, calls
// from its consumer (rdma_cm) and the time, and gives back MADs to send to a peer's QP1, events
// for the consumer and its next timer. It keeps each connection's state, answers duplicates
// (a repeated REQ gets the REP again, a repeated REP the RTU again), retransmits REQ, REP and DREQ
// until answered or out of retries, answers a DREQ with a DREP itself, and resolves UD services
// with SIDR. What the QPs do at each step is the consumer's business, as in the kernel's cma.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "cm/messages.hpp"
#include "uroce/result.hpp"

namespace uroce::cm {

using CommId = uint32_t;

// CM response timeouts and the like are 5-bit codes: 4.096 us * 2^code.
uint64_t cm_timeout_ns(uint8_t code);

struct ManagerConfig {
  uint64_t ca_guid = 0;              // our CA GUID, sent in REQ and REP
  uint64_t seed = 0;                 // communication IDs are random; 0: from std::random_device
  uint8_t response_timeout = 16;     // our CM response timeout code (16: ~268 ms)
  uint8_t max_retries = 15;          // REQ, REP, DREQ and SIDR_REQ sends before giving up
  // Requests the consumer has not answered yet, at most: a peer cannot make us hold more
  // (further REQs get REJ "no resources", further SIDR_REQs status "rejected").
  size_t max_pending = 1024;
  // Of those, from one source address at most (a quarter): one peer, or one spoofed address,
  // cannot take them all while the consumer is not answering.
  size_t max_pending_per_source = 256;
  // Communication (and SIDR request) IDs have id_high in their top id_high_bits: a shared host
  // NIC passes a MAD to the process whose ID it names by these bits.
  uint32_t id_high = 0;
  int id_high_bits = 0;
};

struct Outgoing {
  Gid to;                            // the peer's GID; the MAD goes to its QP1
  Mad mad;
  // An answer to a MAD that named nothing of ours (REJ or SIDR_REP refusing it, DREP to an
  // unknown DREQ): anyone can make us send these, so they go only where QP1 has room.
  bool best_effort = false;
};

enum class EventType : uint8_t {
  ReqReceived,     // passive: a REQ for a listened service; accept() or reject() it
  RepReceived,     // active: the peer accepted; ready the QP, then establish()
  Established,     // both: RTU received (passive) or sent (active)
  Rejected,        // active: a REJ (reason, private data), or no listener at the peer
  Unreachable,     // REQ, REP or SIDR_REQ unanswered after every retry
  DreqReceived,    // the peer disconnects (the DREP is already sent)
  Disconnected,    // our DREQ was answered, or unanswered after every retry
  SidrReqReceived, // passive UD: answer with sidr_reply()
  SidrRepReceived, // active UD: the service's QPN and Q_Key, or a failure status
};
const char* to_string(EventType t);

struct Event {
  EventType type;
  CommId id = 0;                      // our communication ID (the SIDR request ID for SIDR)
  uint64_t listener = 0;              // ReqReceived, SidrReqReceived: the listen() cookie
  Gid peer;
  std::optional<Req> req;             // ReqReceived
  std::optional<Rep> rep;             // RepReceived
  std::optional<Rej> rej;             // Rejected
  std::optional<SidrReq> sidr_req;    // SidrReqReceived
  std::optional<SidrRep> sidr_rep;    // SidrRepReceived
  std::vector<uint8_t> private_data;  // Established (RTU), DreqReceived, Disconnected (DREP)
};

struct CmCounters {
  uint64_t mads_in = 0, mads_out = 0, dropped = 0, retransmits = 0, duplicates = 0, refused = 0;
};

class Manager {
 public:
  explicit Manager(ManagerConfig cfg);

  // Passive side: REQs (or SIDR_REQs) for service_id become events carrying `cookie`.
  Status listen(uint64_t service_id, uint64_t cookie);
  void unlisten(uint64_t service_id);

  // Active side: sends the REQ (its local_comm_id is chosen here) and returns that ID.
  Result<CommId> connect(const Gid& peer, Req req, uint64_t now);
  // Passive: answers a received REQ (local_comm_id, remote_comm_id and GUID are filled in).
  Status accept(CommId id, Rep rep, uint64_t now);
  Status reject(CommId id, uint16_t reason, std::vector<uint8_t> private_data, uint64_t now);
  // Active: after RepReceived, sends the RTU; the connection is established.
  Status establish(CommId id, std::vector<uint8_t> private_data, uint64_t now);
  // Either side of an established connection: sends a DREQ (retransmitted until a DREP).
  Status disconnect(CommId id, std::vector<uint8_t> private_data, uint64_t now);
  // Forgets a connection at once (the consumer destroyed it); nothing is sent.
  void forget(CommId id);

  // UD services.
  Result<CommId> sidr_request(const Gid& peer, SidrReq req, uint64_t now);
  Status sidr_reply(CommId request_id, const Gid& peer, SidrRep rep);

  void on_mad(std::span<const uint8_t> mad, const Gid& from, uint64_t now);
  void on_timer(uint64_t now);
  uint64_t next_deadline() const;  // UINT64_MAX when nothing waits

  std::vector<Outgoing> take_outgoing() { return std::exchange(out_, {}); }
  std::vector<Event> take_events() { return std::exchange(events_, {}); }
  const CmCounters& counters() const { return ctr_; }
  size_t connections() const { return conns_.size(); }
  size_t pending() const { return pending_ + sidr_tid_.size(); }

 private:
  enum class State : uint8_t { ReqSent, RepReceived, ReqReceived, RepSent, Established, DreqSent };
  // A message sent again until it is answered: a connection's REQ, REP or DREQ, a SIDR_REQ.
  struct Outstanding {
    Gid peer;
    Mad last{};                 // what a retransmission or an answer to a duplicate sends
    uint64_t deadline = 0;      // 0: no timer
    uint8_t retries_left = 0;
  };
  struct Conn : Outstanding {
    State state = State::ReqSent;
    CommId remote_id = 0;
    uint32_t remote_qpn = 0;
    uint64_t tid = 0;
  };
  using Sidr = Outstanding;

  CommId fresh_id();
  uint64_t retry_interval() const;
  // Sends mad to o's peer and keeps it for retransmission.
  void send_kept(Outstanding& o, const Mad& mad, uint64_t now);
  // A timer ran out: resends (true), or false when no retry is left.
  bool retry(Outstanding& o, uint64_t now);
  void emit(const Gid& to, const Mad& mad, bool best_effort = false);
  Conn* find(CommId id, State s);
  // A request from `from` waits for the consumer (hold) or no longer does (release).
  void hold(const Gid& from) { ++pending_from_[from]; }
  void release(const Gid& from);
  bool over_share(const Gid& from) const;

  void on_req(const MadHeader& h, const Req& r, const Gid& from, uint64_t now);
  void on_rep(const Rep& r, const Gid& from);
  void on_rtu(const Rtu& r);
  void on_rej(const Rej& r);
  void on_mra(const Mra& r, uint64_t now);
  void on_dreq(const MadHeader& h, const Dreq& r, const Gid& from);
  void on_drep(const Drep& r);
  void on_sidr_req(const MadHeader& h, const SidrReq& r, const Gid& from);
  void on_sidr_rep(const SidrRep& r);

  ManagerConfig cfg_;
  std::mt19937_64 rng_;
  uint64_t next_tid_;
  std::map<uint64_t, uint64_t> listeners_;          // service ID -> cookie
  std::map<CommId, Conn> conns_;                    // by our communication ID
  std::map<std::pair<uint32_t, Gid>, CommId> by_remote_;  // (remote comm ID, peer) -> ours
  std::map<CommId, Sidr> sidr_;                     // our SIDR requests in flight
  // Received SIDR requests not yet answered, by (request ID, source): their TIDs. A copy of one
  // finds it here and is dropped, as the kernel's CM drops it.
  std::map<std::pair<CommId, Gid>, uint64_t> sidr_tid_;
  size_t pending_ = 0;                              // connections in ReqReceived
  std::map<Gid, size_t> pending_from_;              // requests waiting for the consumer, by source
  std::vector<Outgoing> out_;
  std::vector<Event> events_;
  CmCounters ctr_;
};

}  // namespace uroce::cm

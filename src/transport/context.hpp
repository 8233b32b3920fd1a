// What the requester, completer and responder may use of the protocol core, and nothing more:
// transmit buffers, the memory key table, counters, scheduling, completions and the error
// transition. They never see the object tables, receive dispatch or the control path, so a
// change to those cannot reach into the IBA state machines, and a role can be driven in a test
// through the same few calls.
#pragma once
#include <cstdint>
#include <vector>

#include "transport/protocol_core.hpp"

namespace uroce::transport {

class Context {
 public:
  explicit Context(ProtocolCore& core) : core_(core) { UROCE_ASSERT_HELD(core); }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const CoreConfig& config() const { return core_.cfg_; }
  Counters& ctr() { return core_.ctr_; }
  const verbs::MrTable& mrs() const { return core_.mrs_; }
  verbs::MrTable& mrs() { return core_.mrs_; }
  // A remote access to qp's side: a region of its PD, or a window (type 2: bound through qp).
  // *odp: the bytes belong to an on-demand region (move them with verbs/region_access.hpp).
  verbs::KeyCheck check_remote(const Qp& qp, verbs::Rkey rkey, uint64_t va, uint64_t len, uint32_t need,
                               uint8_t** host = nullptr, bool* odp = nullptr) const {
    return check_remote(qp, qp.pd(), rkey, va, len, need, host, odp);
  }
  // The same in a PD given (a queued READ response of an XRC target: its message's PD).
  verbs::KeyCheck check_remote(const Qp& qp, verbs::PdHandle pd, verbs::Rkey rkey, uint64_t va, uint64_t len,
                               uint32_t need, uint8_t** host = nullptr, bool* odp = nullptr) const {
    return core_.mrs_.check_remote(rkey, pd, va, len, need, host, qp.qpn().value(), odp);
  }
  // The XRC SRQ with this number, if it is of XRC domain xrcd.
  verbs::Srq* xrc_srq(uint32_t srqn, uint32_t xrcd) const { return core_.xrc_srq(srqn, xrcd); }

  // Transmit: a free buffer (nullptr and counted when the pool is empty), then emit it with
  // the IBA length of its contents (the ICRC is appended), or hand it back unsent.
  PacketBuf* alloc_tx() { return core_.alloc_tx(); }
  void emit(PacketBuf* p, size_t ib_len) { core_.emit(p, ib_len); }
  void release(PacketBuf* p) { core_.pool_.release(p); }
  // A raw packet QP's frame, to the interface as it is.
  void emit_frame(std::vector<uint8_t>&& f) { core_.frames_out_.push_back(std::move(f)); }
  // Payload bytes at `src` (registered memory, checked) go into tx by reference when the link
  // takes them from there itself (CoreConfig::link_gathers): one copy fewer. The link sends the
  // packet at the end of this pass, under the engine lock; a request executed later in the same
  // pass may write those bytes (a program's reply landing in the buffer it sends from), and
  // the packet then carries bytes its ICRC does not cover: the peer drops it as lost. So the
  // requester copies its resends, which then arrive whole; a READ response lost that way is
  // asked for again.
  // False: the caller copies them into the packet. `answered`: the work request completes only
  // on the peer's answer (PacketBuf::ref_until_answered).
  bool by_reference(PacketBuf* tx, uint32_t at, const uint8_t* src, uint32_t len, bool answered) {
    if (!len || !src || !core_.cfg_.link_gathers) return false;
    tx->ref = src;
    tx->ref_at = at;
    tx->ref_len = len;
    tx->ref_until_answered = answered;
    ++core_.ctr_.tx_payload_by_ref;
    return true;
  }

  // Scheduling: the run list, the QP's timer, and the coalesced ACK at the end of this pass.
  void schedule(Qp& qp) { core_.schedule(qp); }
  void arm_timer(Qp& qp, uint64_t deadline) { core_.arm_timer(qp, deadline); }
  void want_ack(Qp& qp) { core_.want_ack(qp); }

  // Completions and the QP's lifecycle.
  void push_wc(verbs::Cq* cq, const Wc& wc) { core_.push_wc(cq, wc); }
  void complete_send(Qp& qp, verbs::SendWqe& w, WcStatus st) { core_.complete_send(qp, w, st); }
  // fatal: an error moved it there (QP_FATAL is raised), not the application.
  void qp_to_error(Qp& qp, bool fatal = true) { core_.qp_to_error(qp, fatal); }
  // The next receive WQE of qp (from its RQ or its SRQ), consumed; false if there is none.
  bool pop_recv(Qp& qp, verbs::RecvWqe& w, std::vector<Sge>& sges) { return core_.pop_recv(qp, w, sges); }

  bool tracing() const { return bool(core_.cfg_.trace); }
  void trace(const Qp& qp, const wire::Packet& p, Verdict v) {
    if (core_.cfg_.trace) core_.cfg_.trace(qp, p, v);
  }

 private:
  ProtocolCore& core_;
};

}  // namespace uroce::transport

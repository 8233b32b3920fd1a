// The one dispatch on a QP's recovery: selective repeat where the QP chose it (RC only),
// go-back-N everywhere else. What either keeps is theirs; the roles see only recovery.hpp.
#include "transport/recovery/recovery.hpp"

#include "transport/recovery/go_back_n.hpp"
#include "transport/recovery/selective/selective.hpp"

namespace uroce::transport::recovery {

namespace {
bool sr(const Qp& qp) { return qp.req.sr; }
}  // namespace

void start(Qp& qp, bool chosen, bool agreed) {
  qp.req.sr = qp.type() == QpType::RC && chosen;
  qp.req.peer_sr = qp.req.sr && agreed;
  qp.req.peer_settled = !qp.req.sr || agreed;
  qp.resp.sr = qp.req.peer_sr;
  qp.sr_send = SrSendState{};
  qp.sr_hold.reset();
  qp.sr_read.reset();
  qp.resp.held = 0;
  qp.resp.disputed = 0;
}

// ---- responder ----
bool holds(const Qp& qp, const wire::Packet& p) { return sr(qp) && sr_holds(qp, p); }
Verdict hold(Context& cx, Qp& qp, const wire::Packet& p) { return sr_hold(cx, qp, p); }
void on_in_sequence(Context& cx, Qp& qp, const wire::Packet& p) {
  if (sr(qp) && sr_holding(qp)) sr_conflicts(cx, qp, p);
}
void after_request(Context& cx, Qp& qp, const wire::Packet& p, Verdict v, wire::Psn from, uint64_t now) {
  if (sr(qp)) sr_after_request(cx, qp, p, v, from, now);
}
bool in_order(const Qp& qp) { return !sr(qp); }
bool takes_opcode(const Qp& qp, const wire::Packet& p) {
  return !p.has(wire::kPlaceEth) || (sr(qp) && sr_takes_opcode(qp, p));
}
bool takes_partial_read(const Qp& qp, const wire::Packet& p) { return sr(qp) && sr_takes_partial_read(qp, p); }
void mark_answer(const Qp& qp, wire::Packet& p) {
  if (sr(qp)) sr_mark_answer(qp, p);
}
bool acks_selectively(const Qp& qp) { return sr(qp) && sr_holding(qp); }
void send_sack(Context& cx, Qp& qp, wire::Psn acked) { sr_send_sack(cx, qp, acked); }

// ---- requester ----
uint32_t window(const Context& cx, const Qp& qp) { return sr(qp) ? sr_window(cx) : go_back_n::window(cx, qp); }
bool window_full(const Qp& qp, wire::Psn psn, uint32_t window) {
  return sr(qp) ? sr_window_full(qp, psn, window) : go_back_n::window_full(qp, psn, window);
}
bool placeable(Qp& qp, const verbs::SendWqe& w) { return sr(qp) && sr_placeable(qp, w); }
void shape_send(const Qp& qp, const verbs::SendWqe& w, uint32_t k, wire::Packet& p) {
  if (sr(qp)) sr_shape_send(qp, w, k, p);
}
void mark_request(const Qp& qp, const verbs::SendWqe& w, wire::Psn psn, wire::Packet& p) {
  if (sr(qp)) sr_mark_request(qp, w, psn, p);
}
Resend on_resend(const Qp& qp, wire::Psn psn) {
  bool stop = false;
  if (!sr(qp) || !sr_skips(qp, psn, stop)) return stop ? Resend::StopHere : Resend::Send;
  return Resend::SkipPacket;
}
void on_go_back(Qp& qp) {
  if (sr(qp)) sr_on_go_back(qp);
}

// ---- completer ----
void on_response_gap(Context& cx, Qp& qp, wire::Psn from, wire::Psn upto) {
  if (sr(qp))
    sr_on_response_gap(cx, qp, from, upto);
  else
    go_back_n::on_response_gap(cx, qp, from);
}
bool places_reads(const Qp& qp) { return sr(qp) && qp.req.peer_sr; }
Verdict place_read_response(Context& cx, Qp& qp, const wire::Packet& p) { return sr_place_read_response(cx, qp, p); }
Verdict on_passed_response(Context& cx, Qp& qp, verbs::SendWqe& w, const wire::Packet& p) {
  return places_reads(qp) ? sr_on_passed_response(cx, qp, w, p) : go_back_n::on_passed_response(cx);
}
void on_response_taken(Qp& qp, wire::Psn psn) {
  if (sr(qp)) sr_read_take(qp, psn);  // placed before, and answered again
}
bool any_read_position(const Qp& qp) { return places_reads(qp); }
void on_rewind(Qp& qp, wire::Psn psn) {
  if (sr(qp)) sr_mark(qp, psn, false);  // the responder wants this one, whatever an older SACK said
}
void on_plain_ack(Qp& qp) {
  if (sr(qp)) sr_on_plain_ack(qp);
}
Verdict on_sack(Context& cx, Qp& qp, const wire::Packet& p, bool& progress) {
  return sr(qp) ? sr_on_sack(cx, qp, p, progress) : go_back_n::on_sack(cx);
}
void after_answer(Context& cx, Qp& qp, bool& progress) {
  if (sr(qp) && sr_reads_placed(qp)) sr_advance_placed(cx, qp, progress);  // the answer ahead of them came
}
void on_una_moved(Qp& qp, const wire::Packet& p, wire::Psn before) {
  if (sr(qp)) sr_on_una_moved(qp, p, before);
}

// ---- timers ----
uint64_t probe_interval(const Context& cx, const Qp& qp) { return sr(qp) ? sr_probe_interval(cx, qp) : 0; }
void probe(Context& cx, Qp& qp) { sr_probe(cx, qp); }
void on_timeout(Qp& qp, wire::Psn from) {
  if (sr(qp)) sr_on_timeout(qp, from);
}

}  // namespace uroce::transport::recovery

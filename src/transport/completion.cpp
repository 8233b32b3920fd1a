// Completions and QP lifecycle: completion entries, send WQE retirement, entering ERR,
// flushing and resetting a QP (engine lock held).
#include <mutex>

#include "transport/recovery/recovery.hpp"
#include "transport/roles.hpp"
#include "transport/tag_matching.hpp"

namespace uroce::transport {

using verbs::Cq;

void ProtocolCore::push_wc(Cq* cq, const Wc& wc) {
  bool was_overrun = cq->overrun();
  if (!cq->push(wc, now_)) {
    ++ctr_.cq_overruns;
    if (!was_overrun) {  // reported once per CQ
      AsyncEvent e{AsyncEventType::CqErr};
      e.cq_handle = cq->handle();
      raise(e);
    }
    return;
  }
  ++wcs_made_;
  if (cq->take_event_for(wc)) cq_events_.push_back(cq);
}


void ProtocolCore::complete_send(Qp& qp, verbs::SendWqe& w, WcStatus st) {
  if (is_rd_atomic(w.opcode) && w.assigned && qp.req.rd_atomic_out) --qp.req.rd_atomic_out;
  const bool rendezvous = w.flags & tm::kSendRendezvous;  // the device's own WQE: its SRQ hears of it
  const WrOpcode op = w.opcode;
  bool report = !rendezvous && (qp.sig_all() || (w.flags & kSendSignaled) || st != WcStatus::Success);
  Wc wc;
  if (report) {
    wc.wr_id = w.wr_id;
    wc.status = st;
    wc.opcode = traits(w.opcode).wc;
    wc.byte_len = st == WcStatus::Success && !traits(w.opcode).local ? w.length : 0;
    wc.qp_num = qp.qpn().value();
  }
  uint32_t d = qp.sq.done.load(std::memory_order_relaxed);
  if (qp.req.next == d) {  // never let the requester point at a freed slot
    qp.req.next = d + 1;
    qp.req.pkt = 0;
  }
  // Free the slot before the completion is visible: a program that polls it may post at once
  // and must find the room it was promised.
  qp.sq.done.store(d + 1, std::memory_order_release);
  if (report) push_wc(qp.send_cq, wc);
  if (rendezvous) {
    Context cx(*this);
    tm::rendezvous_done(cx, qp, op, st);
  }
}

void ProtocolCore::qp_to_error(Qp& qp, bool fatal) {
  if (fatal) {
    AsyncEvent e{AsyncEventType::QpFatal};
    e.qp_num = qp.qpn().value();
    raise(e);
  }
  qp.set_state(QpState::Err);
  qp.flush_pending = true;
  qp.timers.clear();
  schedule(qp);
}

void ProtocolCore::flush(Qp& qp) {
  qp.flush_pending = false;
  auto& sq = qp.sq;
  uint32_t prod = sq.prod.load(std::memory_order_acquire);
  while (sq.done.load(std::memory_order_relaxed) != prod)
    complete_send(qp, sq.slot(sq.done.load(std::memory_order_relaxed)), WcStatus::WrFlushErr);
  qp.req.next = prod;
  qp.req.pkt = 0;
  qp.req.rd_atomic_out = 0;
  Wc wc;
  wc.status = WcStatus::WrFlushErr;
  wc.opcode = WcOpcode::Recv;
  wc.qp_num = qp.qpn().value();
  if (qp.resp.have_recv) {
    wc.wr_id = qp.resp.recv_wr_id;
    qp.resp.have_recv = false;
    if (qp.srq && qp.srq->tm) {  // a tagged buffer's: with its tag
      Context cx(*this);
      tm::complete(cx, qp, wc);
    } else {
      push_wc(qp.recv_cq, wc);
    }
  }
  if (qp.srq) {
    // The SRQ's WQEs belong to its other QPs too: nothing more is flushed (IBA 11.6.3).
    AsyncEvent e{AsyncEventType::QpLastWqeReached};
    e.qp_num = qp.qpn().value();
    raise(e);
  } else {
    auto& rq = qp.rq;
    uint32_t rprod = rq.prod.load(std::memory_order_acquire);
    for (uint32_t i = rq.done.load(std::memory_order_relaxed); i != rprod; ++i) {
      wc.wr_id = rq.slot(i).wr_id;
      push_wc(qp.recv_cq, wc);
      rq.done.store(i + 1, std::memory_order_release);
    }
  }
  qp.resp.jobs.clear();
  qp.resp.msg = RespMsg::None;
}

void ProtocolCore::start_qp_options(Qp& qp) {
  recovery::start(qp, qp.sr_choice.value_or(cfg_.reliability == Reliability::Sr), qp.sr_choice.has_value());
  qp.pacer = cc::Pacer{};
  // DCQCN reacts to CNPs (RC and UC); TIMELY and Swift to round trips, which only RC measures.
  const bool rc = reliable_connected(qp.type()), uc = qp.type() == QpType::UC;
  qp.rate = rc || uc ? cc::make_rate_control(qp.cc_choice.value_or(cfg_.cc), rc, cfg_.dcqcn, cfg_.timely, cfg_.swift)
                     : nullptr;
  qp.req.paced = qp.rate != nullptr || qp.limit_bps > 0;
}

void ProtocolCore::reset_qp(Qp& qp) {
  {
    std::lock_guard g(qp.sq.producer_lock);
    qp.sq.reset();
  }
  {
    std::lock_guard g(qp.rq.producer_lock);
    qp.rq.reset();
  }
  qp.req = RequesterState{};
  qp.comp = CompleterState{};
  size_t resources = qp.resp.resources.size();
  qp.resp = ResponderState{};
  qp.resp.resources.assign(resources, RdAtomicResource{});
  qp.tm_rndv.clear();
  qp.limit_bps = 0;  // attributes start over in RESET, its rate limit among them
  qp.limit_burst = 0;
  start_qp_options(qp);  // a QP back in RESET starts its congestion control and reliability afresh too
  qp.flush_pending = false;
  qp.timer_queued = 0;
  qp.timers.clear();
  qp.rtt.on_retransmit();  // nothing in flight is timed any more
  std::erase(ack_list_, &qp);
  // What it completed before (its flushed requests among them) goes too: a program that
  // brings the QP back up polls only what the QP does from now on.
  if (qp.send_cq) qp.send_cq->purge(qp.qpn().value());  // an XRC target has none
  if (qp.recv_cq && qp.recv_cq != qp.send_cq) qp.recv_cq->purge(qp.qpn().value());
}

}  // namespace uroce::transport

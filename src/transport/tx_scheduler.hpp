// The transmit scheduler: which QP with work sends next (IEEE 802.1Qaz, as a RoCE NIC's). A
// QP waits in the list of its priority (its traffic class's DSCP through PortQos's map).
// Each pass serves the strict priorities first, highest first, then the ETS priorities by
// start-time fair queueing: each has a virtual time, the bytes it sent over its weight, and
// is served in a pass only while within one visit of the priority furthest behind. A QP sends
// at most once per pass (its per-pass budget), so a priority of weight 1 beside one of weight
// 3 sits out two passes in three. An optional port rate books every data packet's bytes, so
// that below it the scheduler, not the link, picks whose packet leaves; the port of a device
// several processes share is one clock for all of them (shared_port.hpp).
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "cc/pacer.hpp"
#include "transport/shared_port.hpp"
#include "uroce/types.hpp"

namespace uroce::transport {

struct Qp;

class TxScheduler {
 public:
  static constexpr int kPriorities = PortQos::kPriorities;
  // Data may leave this long after the port's bytes are due: the bytes of one pass share its time.
  static constexpr uint64_t kPortSlackNs = 10'000;
  // After an idle time the port may send this much of its time back to back, so that an engine
  // that wakes late (a timer's slack is 50 us) still keeps the rate. What it sends at once
  // queues in front of a link as fast as the port, for good: a port rate a little below the
  // link's lets that queue drain.
  static constexpr uint64_t kPortBurstNs = 100'000;

  // Between processes on a shared port: how far ahead of the one furthest behind a process
  // may book, in bytes of weight 1; how long one that is further waits before it looks again;
  // how long its mark that it waits lasts unrenewed; and how long at most it lets one that
  // never sends (a process that stopped, or lies) hold it back.
  static constexpr uint64_t kProcWindowBytes = 64 * 1024;
  static constexpr uint64_t kProcHoldNs = 50'000;
  static constexpr uint64_t kProcWaitingNs = 1'000'000;
  static constexpr uint64_t kProcMaxHoldNs = 2'000'000;

  void configure(const PortQos& q, uint32_t visit_bytes);
  // Books the port on `sp` (a host NIC's, as process `slot`) instead of a clock of its own.
  void share_port(SharedPort* sp, uint32_t slot);
  uint8_t priority_of(uint8_t traffic_class) const { return qos_.priority_of(traffic_class); }
  // A QP's priority: the host's class for its peer and QPN if one has it (a shared port's
  // classes, the flow table's "action prio"), else its traffic class's.
  uint8_t priority_for(uint8_t traffic_class, const Gid& peer, uint32_t qpn);

  void push(Qp& q);   // the caller marks it listed (Qp::active) and sets Qp::prio
  void erase(Qp* q);  // a QP that goes away
  bool empty() const { return listed_ == 0; }
  // True while QPs wait for the port rate only: no pass would send anything before port_opens_at.
  bool port_closed(uint64_t now) const {
    return port_bps_ > 0 && (port_free_at(now) > now + kPortSlackNs || held_until_ > now);
  }
  uint64_t port_opens_at(uint64_t now) const {
    const uint64_t at = port_free_at(now);
    return std::max(at > kPortSlackNs ? at - kPortSlackNs : 0, held_until_);
  }

  // One pass. visit(qp, max_bytes) runs a QP (taken off its list) with at most about max_bytes
  // of data and returns the bytes it sent; go_on() false ends the pass. QPs not reached keep
  // their place, ahead of those that ran. Called while QPs are listed, the port open or not:
  // on a shared port the others learn that this process waits.
  template <class Visit, class GoOn>
  void pass(uint64_t now, Visit&& visit, GoOn&& go_on);

  uint64_t sent_bytes(int prio) const { return sent_[size_t(prio)]; }

 private:
  struct List {
    std::vector<Qp*> qps;  // [head, end): listed; a pass visits those listed at its start
    size_t head = 0;
    double vtime = 0;  // ETS: bytes sent over the weight, relative to the furthest behind
    bool listed() const { return head < qps.size(); }
  };
  // Runs the QPs of one priority listed at the pass's start, while `more()`.
  template <class Visit, class GoOn, class More>
  void serve(int p, uint64_t now, size_t end, Visit& visit, GoOn& go_on, More more);
  uint64_t port_room(uint64_t now) const;
  uint64_t port_free_at(uint64_t now) const;
  void book_port(uint64_t bytes, uint64_t now);
  void mark_waiting(uint64_t now);  // on a shared port: this process has packets for it
  bool my_turn(uint64_t now);       // on a shared port: not too far ahead of the other processes
  void compact(List& l);

  PortQos qos_;
  std::array<List, kPriorities> lists_;
  size_t listed_ = 0;
  double window_ = 0;  // ETS: how far past the furthest-behind priority another may be served
  double port_bps_ = 0;
  cc::Pacer port_;
  SharedPort* shared_ = nullptr;
  uint32_t slot_ = 0;
  uint64_t held_until_ = 0, held_since_ = 0, free_until_ = 0;
  bool came_back_ = false;
  std::vector<SharedPort::Class> classes_;  // the shared port's, as of class_seen_
  uint32_t class_seen_ = UINT32_MAX;
  std::array<uint64_t, kPriorities> sent_{};
};

// -------------------------------------------------------------------------------------------

template <class Visit, class GoOn, class More>
void TxScheduler::serve(int p, uint64_t now, size_t end, Visit& visit, GoOn& go_on, More more) {
  List& l = lists_[size_t(p)];
  while (l.head < end && go_on() && more()) {
    if (port_bps_ > 0 && port_closed(now)) return;
    Qp* q = l.qps[l.head];
    l.qps[l.head++] = nullptr;
    --listed_;
    const uint64_t bytes = visit(*q, port_room(now));
    sent_[size_t(p)] += bytes;
    if (!qos_.strict[size_t(p)]) l.vtime += double(bytes) / qos_.weight[size_t(p)];
    if (port_bps_ > 0 && bytes) book_port(bytes, now);
  }
}

template <class Visit, class GoOn>
void TxScheduler::pass(uint64_t now, Visit&& visit, GoOn&& go_on) {
  if (empty()) return;
  mark_waiting(now);
  if (port_closed(now) || !my_turn(now)) return;
  std::array<size_t, kPriorities> end;
  for (int p = 0; p < kPriorities; ++p) end[size_t(p)] = lists_[size_t(p)].qps.size();
  for (int p = kPriorities - 1; p >= 0; --p)
    if (qos_.strict[size_t(p)]) serve(p, now, end[size_t(p)], visit, go_on, [] { return true; });
  // ETS: virtual times relative to the listed priority furthest behind, each served while
  // within the window of it, those furthest behind first.
  double base = 0;
  bool any = false;
  for (int p = 0; p < kPriorities; ++p)
    if (!qos_.strict[size_t(p)] && lists_[size_t(p)].listed()) {
      base = any ? std::min(base, lists_[size_t(p)].vtime) : lists_[size_t(p)].vtime;
      any = true;
    }
  std::array<int, kPriorities> order;
  int n = 0;
  for (int p = 0; p < kPriorities; ++p) {
    List& l = lists_[size_t(p)];
    if (qos_.strict[size_t(p)]) continue;
    l.vtime = l.listed() ? l.vtime - base : 0;
    if (l.listed()) order[size_t(n++)] = p;
  }
  std::stable_sort(order.begin(), order.begin() + n,
                   [&](int a, int b) { return lists_[size_t(a)].vtime < lists_[size_t(b)].vtime; });
  for (int i = 0; i < n; ++i) {
    List& l = lists_[size_t(order[size_t(i)])];
    serve(order[size_t(i)], now, end[size_t(order[size_t(i)])], visit, go_on, [&] { return l.vtime < window_; });
  }
  for (List& l : lists_) compact(l);
  if (shared_ && empty()) shared_->proc[slot_].waiting_until.store(0, std::memory_order_relaxed);
}

}  // namespace uroce::transport

// An in-memory link with seeded fault injection: drop, duplicate, reorder, delay, corrupt.
// It keeps virtual time: packets are handed over when the caller's clock reaches their
// delivery time, so runs are exactly repeatable for a seed.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <random>
#include <vector>

#include "link/link.hpp"
#include "wire/ip_udp.hpp"

namespace uroce::sim {

using link::Link;
using link::PacketSink;

struct FaultConfig {
  double drop = 0;        // probability a packet is lost
  double duplicate = 0;   // probability it is delivered twice
  double reorder = 0;     // probability it is held back by up to reorder_ns
  double corrupt = 0;     // probability one byte is flipped (the ICRC must catch it)
  double ce_mark = 0;     // probability it arrives ECN CE-marked (a congested queue on the way)
  uint64_t delay_ns = 2'000;
  // Each sender's line rate (0: none): its packets leave one after another, each taking its
  // bytes' time on the wire, before the delay; the queue in front of the wire has no limit.
  double rate_bps = 0;
  uint64_t reorder_ns = 20'000;
};

// A switch between the hosts (off unless `on`): every frame crosses it after its sender's
// wire and delay, and waits in the output queue of its destination's port, which sends at
// port_bps. A queue past buffer_bytes drops what arrives (tail drop), or with pfc never drops:
// a queue past xoff_bytes pauses every sender that feeds it until it has drained to xon_bytes
// (a paused sender's frames wait in its own queue; the one on its wire, and those on the way,
// still arrive).
struct SwitchConfig {
  bool on = false;
  double port_bps = 100e9;
  uint64_t buffer_bytes = 2u << 20;
  bool pfc = false;
  uint64_t xoff_bytes = 1u << 20, xon_bytes = 512u << 10;
  uint64_t delay_ns = 1'000;  // switch to host
  // ECN: the probability a frame joining a queue of n bytes is marked CE (RED); unset: none.
  std::function<double(uint64_t queue_bytes)> mark;
  // Called with each output queue's length as a frame joins it (the frame not counted).
  std::function<void(const Gid& port, uint64_t queue_bytes)> on_enqueue;
};

struct LinkStats {
  uint64_t sent = 0, delivered = 0, dropped = 0, duplicated = 0, reordered = 0, corrupted = 0, unroutable = 0,
           ce_marked = 0, filtered = 0, switch_drops = 0, pauses = 0;  // pauses: a sender paused, not already
};

class LossyLink {
 public:
  struct Frame {
    uint64_t due = 0;
    uint64_t seq = 0;
    wire::FlowAddr flow;
    std::vector<uint8_t> bytes;
    uint8_t tos = 0;  // as it arrives: ECN bits included
    // Where it is due: at its host, at the switch, or (PFC; no bytes) a turn of its sender's
    // queue, whose head goes on the wire then unless paused.
    enum class Stage : uint8_t { Host, Switch, Sender } stage = Stage::Host;
    uint64_t sent_at = 0;  // when its sender handed it over (PFC: due - sent_at is its reordering delay)
    bool operator>(const Frame& o) const { return due != o.due ? due > o.due : seq > o.seq; }
  };

  LossyLink(uint64_t seed, FaultConfig f) : rng_(seed), f_(f) {}
  void set_switch(SwitchConfig s) { sw_ = std::move(s); }
  // A device's attachment to this medium at address ip: a Link in virtual time.
  std::unique_ptr<Link> attach(const Gid& ip);
  void set_faults(FaultConfig f) { f_ = f; }
  void send(const uint8_t* data, size_t len, const wire::FlowAddr& flow, uint64_t now);
  bool pop_due(uint64_t now, Frame& out);
  // The next frame for ip that is due at `now`, if any.
  bool pop_due_for(const Gid& ip, uint64_t now, Frame& out);
  uint64_t next_due() const { return !held_.empty() ? 0 : q_.empty() ? UINT64_MAX : q_.top().due; }
  const LinkStats& stats() const { return st_; }
  // Called for every frame sent, when it is decided (dropped, or due at f.due).
  void set_trace(std::function<void(const Frame&, bool dropped)> t) { trace_ = std::move(t); }
  // Called for every frame sent, before any fault: it may change the bytes (a peer's view of
  // them, a test's chosen loss) or return false to remove the frame (counted as filtered).
  using Filter = std::function<bool(const wire::FlowAddr&, std::vector<uint8_t>& bytes)>;
  void set_filter(Filter f) { filter_ = std::move(f); }
  // With a line rate (no PFC): called with the bytes waiting in front of a sender's wire as a
  // frame joins them (the frame not counted).
  void set_wire_probe(std::function<void(const Gid& sender, uint64_t queue_bytes)> p) { wire_probe_ = std::move(p); }

 private:
  bool chance(double p) { return p > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  uint64_t& wire_free(const Gid& sender);
  uint64_t& paused_until(const Gid& sender);
  std::deque<Frame>& sender_queue(const Gid& sender);
  // PFC: the sender's turn: the head of its queue goes on the wire unless paused.
  void at_sender(Frame turn);
  // A frame reaches the switch: dropped, or queued at its port (marked, pausing its senders).
  void at_switch(Frame f);
  struct OutPort {
    Gid dst;
    uint64_t free_at = 0;                              // its wire is busy until then
    std::deque<std::pair<uint64_t, uint32_t>> queue;   // (leaves at, bytes) of frames not yet gone
    uint64_t bytes = 0;
    std::vector<Gid> feeders;                          // senders that sent to it (PFC pauses them)
  };
  SwitchConfig sw_;
  std::vector<OutPort> ports_;
  std::mt19937_64 rng_;
  FaultConfig f_;
  LinkStats st_;
  uint64_t seq_ = 0;
  std::vector<std::pair<Gid, uint64_t>> wire_free_;  // per sender: when its wire is next idle
  std::vector<std::pair<Gid, uint64_t>> paused_;     // per sender: PFC holds its queue until then
  std::vector<std::pair<Gid, std::deque<Frame>>> sender_q_;  // PFC: per sender, frames not yet on the wire
  std::function<void(const Frame&, bool dropped)> trace_;
  Filter filter_;
  std::function<void(const Gid& sender, uint64_t queue_bytes)> wire_probe_;
  std::priority_queue<Frame, std::vector<Frame>, std::greater<>> q_;
  std::vector<Frame> held_;  // due frames popped for another address, in due order
  std::vector<Gid> attached_;  // addresses with a port
};

}  // namespace uroce::sim

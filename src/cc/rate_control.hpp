// Congestion control behind one interface: what a QP's sender may send, as a rate. The
// transport feeds it the events it sees (bytes sent, CNPs, RTT samples) and the time, and asks
// for the rate and the next moment a timer of the algorithm is due; nothing here reads a
// clock or touches a packet.
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>

#include "uroce/types.hpp"

namespace uroce::cc {

class RateControl {
 public:
  virtual ~RateControl() = default;
  virtual double rate_bps() const = 0;
  // The QP put `bytes` on the wire (payload and headers) at `now`.
  virtual void on_sent(uint64_t bytes, uint64_t now) = 0;
  // A congestion notification packet (BTH opcode 0x81) for this QP arrived.
  virtual void on_cnp(uint64_t now) = 0;
  // A request's round trip, from its first send to the ACK that covers it.
  virtual void on_rtt(uint64_t rtt_ns, uint64_t now) = 0;
  // Packets the QP may have in flight (a window-based algorithm's window; at least 1).
  virtual uint32_t window_pkts() const { return UINT32_MAX; }
  // Runs the algorithm's timers up to `now`.
  virtual void advance(uint64_t now) = 0;
  // When advance() next has work (UINT64_MAX: never by itself). The transport arms no timer for
  // it: every event runs the timers up to its own time first, and a rate matters when a packet
  // is booked on the pacer (on_sent, then rate_bps), so one firing in between changes nothing a
  // packet sees but the spacing already booked for the next.
  virtual uint64_t next_timer() const = 0;
};

// An algorithm driven by round trips alone (TIMELY, Swift): no byte counter, CNP or timer.
class RoundTripControl : public RateControl {
 public:
  void on_sent(uint64_t, uint64_t) override {}
  void on_cnp(uint64_t) override {}
  void advance(uint64_t) override {}
  uint64_t next_timer() const override { return UINT64_MAX; }
};

// The algorithm, as the public API names it (uroce::CongestionControl).
using Algo = CongestionControl;
// TIMELY and Swift feed on round trips, which only a QP whose requests are acknowledged (RC) has.
inline bool needs_round_trips(Algo a) { return a == Algo::Timely || a == Algo::Swift; }

struct DcqcnParams;
struct TimelyParams;
struct SwiftParams;
// A QP's sender under algorithm a (null for none, or for one that needs round trips on a QP
// whose requests are not acknowledged).
std::unique_ptr<RateControl> make_rate_control(Algo a, bool acked, const DcqcnParams& dcqcn,
                                               const TimelyParams& timely, const SwiftParams& swift);


}  // namespace uroce::cc

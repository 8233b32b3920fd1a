// Swift (Kumar et al., "Swift: Delay is Simple and Effective for Congestion Control in the
// Datacenter", SIGCOMM 2020): a congestion window from round-trip delay against a target.
// Below the target the window grows by `ai` packets per round trip; above it, at most once per
// round trip, it shrinks in proportion to how far the delay is over (never by more than
// max_mdf). The target is the base round trip (the fabric's, or the smallest seen) plus a queueing allowance,
// plus flow-based scaling: a smaller window gets a larger target, so that many flows sharing
// a bottleneck, each with a window of a packet or less, still converge instead of cutting each
// other down. The window bounds the QP's packets in flight; below one packet, the pacer
// spaces them a round trip / window apart.
#pragma once
#include <cstdint>

#include "cc/rate_control.hpp"

namespace uroce::cc {

struct SwiftParams {
  double line_rate_bps = 100e9;
  double min_rate_bps = 10e6;
  uint32_t mss_bytes = 4096;     // a packet, the window's unit
  double ai = 1.0;               // packets per round trip below the target
  double beta = 0.8;             // decrease per unit of relative excess delay
  double max_mdf = 0.5;          // at most this share cut per round trip
  // The fabric's round trip with empty queues, when known (the paper's base target); 0: the
  // smallest round trip measured, which overstates it when the QP starts into a standing queue.
  uint64_t base_rtt_ns = 0;
  uint64_t queue_target_ns = 10'000;  // allowed over the base round trip
  // Flow-based scaling: the target gains up to fs_range_ns as the window goes from
  // fs_max_cwnd down to fs_min_cwnd packets (as 1/sqrt(window)).
  uint64_t fs_range_ns = 40'000;
  double fs_min_cwnd = 0.1, fs_max_cwnd = 100;

  // uroce's values for a line rate (the paper's rule with targets for a few-microsecond fabric).
  static SwiftParams for_line_rate(double line_rate_bps);
  // The engine's: a software NIC's own round trip varies by tens of microseconds (an engine
  // pass or two on each side, threads sharing cores), which a 10 us allowance reads as a queue
  // and answers by starving the QP (0.55x of none on loopback); 50 us keeps none's goodput with
  // a window of tens of packets instead of hundreds. (Swift proper keeps a separate target for
  // the hosts' delay, measured with NIC timestamps.)
  static SwiftParams for_engine(double line_rate_bps);
};

class Swift final : public RoundTripControl {
 public:
  explicit Swift(const SwiftParams& p);
  double rate_bps() const override { return rate_; }
  double cwnd() const { return cwnd_; }
  uint32_t window_pkts() const override { return cwnd_ >= 1 ? uint32_t(cwnd_) : cwnd_ > 0 ? 1 : UINT32_MAX; }
  uint64_t target_ns() const;  // for the current window and base round trip
  void on_rtt(uint64_t rtt_ns, uint64_t now) override;

 private:
  SwiftParams p_;
  double rate_;
  double cwnd_ = 0;            // packets; 0: no round trip seen yet
  uint64_t base_rtt_ = 0;      // the smallest round trip seen
  uint64_t last_decrease_ = 0;
  bool decreased_ = false;
};

}  // namespace uroce::cc

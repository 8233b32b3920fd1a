// TIMELY (Mittal et al., "TIMELY: RTT-based Congestion Control for the Datacenter", SIGCOMM
// 2015): a rate from round-trip times alone. Below T_low the rate grows by delta; above T_high
// it is cut in proportion to how far the RTT is over; between the two it follows the RTT's
// gradient (smoothed, normalised by the minimum RTT): a rising RTT cuts the rate by beta times
// the gradient, a falling or flat one adds delta, five times delta after five such samples in
// a row (hyper-active increase).
#pragma once
#include <cstdint>
#include <string_view>

#include "cc/rate_control.hpp"

namespace uroce::cc {

struct TimelyParams {
  double line_rate_bps = 40e9;
  double min_rate_bps = 10e6;
  double ewma = 0.875;           // alpha: the weight of a new RTT difference
  double beta = 0.8;             // multiplicative decrease
  double delta_bps = 10e6;       // additive increase
  uint64_t t_low_ns = 50'000;
  uint64_t t_high_ns = 500'000;
  uint64_t min_rtt_ns = 20'000;  // normalises the gradient
  uint32_t hai_after = 5;        // gradient <= 0 this many times in a row: increase by 5 delta

  // The paper's values (T_low 50 us, T_high 500 us, beta 0.8, alpha 0.875, delta 10 Mb/s,
  // minimum RTT 20 us).
  static TimelyParams paper(double line_rate_bps);
};

class Timely final : public RoundTripControl {
 public:
  explicit Timely(const TimelyParams& p) : p_(p), rate_(p.line_rate_bps) {}
  double rate_bps() const override { return rate_; }
  double gradient() const { return rtt_diff_ / double(p_.min_rtt_ns); }
  void on_rtt(uint64_t rtt_ns, uint64_t now) override;

 private:
  TimelyParams p_;
  double rate_;
  double rtt_diff_ = 0;   // smoothed difference between consecutive RTTs, in ns
  uint64_t prev_rtt_ = 0;  // 0: no sample yet
  uint32_t calm_ = 0;      // samples in a row with gradient <= 0
};

}  // namespace uroce::cc

#include "cc/timely.hpp"

#include <algorithm>

namespace uroce::cc {

TimelyParams TimelyParams::paper(double line_rate_bps) {
  TimelyParams p;
  p.line_rate_bps = line_rate_bps;
  return p;
}

void Timely::on_rtt(uint64_t rtt, uint64_t) {
  if (prev_rtt_ == 0) {  // the first sample has no difference to go by: it only sets the base
    prev_rtt_ = rtt;
    return;
  }
  const double diff = double(rtt) - double(prev_rtt_);
  prev_rtt_ = rtt;
  rtt_diff_ = (1 - p_.ewma) * rtt_diff_ + p_.ewma * diff;
  const double g = gradient();
  if (rtt < p_.t_low_ns) {
    rate_ += p_.delta_bps;
    calm_ = 0;
  } else if (rtt > p_.t_high_ns) {
    rate_ *= 1 - p_.beta * (1 - double(p_.t_high_ns) / double(rtt));
    calm_ = 0;
  } else if (g <= 0) {
    ++calm_;
    rate_ += (calm_ >= p_.hai_after ? 5 : 1) * p_.delta_bps;
  } else {
    rate_ *= 1 - p_.beta * g;
    calm_ = 0;
  }
  rate_ = std::clamp(rate_, p_.min_rate_bps, p_.line_rate_bps);
}

}  // namespace uroce::cc

#include "cc/swift.hpp"

#include <algorithm>
#include <cmath>

namespace uroce::cc {

SwiftParams SwiftParams::for_line_rate(double line_rate_bps) {
  SwiftParams p;
  p.line_rate_bps = line_rate_bps;
  return p;
}

SwiftParams SwiftParams::for_engine(double line_rate_bps) {
  SwiftParams p = for_line_rate(line_rate_bps);
  p.queue_target_ns = 50'000;
  return p;
}

// With the fabric's round trip known, the QP starts with a window of one bandwidth-delay
// product; else unbounded until its first round trip.
Swift::Swift(const SwiftParams& p) : p_(p), rate_(p.line_rate_bps) {
  if (p_.base_rtt_ns) cwnd_ = std::max(1.0, p_.line_rate_bps * double(p_.base_rtt_ns) * 1e-9 / (8.0 * p_.mss_bytes));
}

uint64_t Swift::target_ns() const {
  const double a = double(p_.fs_range_ns) / (1 / std::sqrt(p_.fs_min_cwnd) - 1 / std::sqrt(p_.fs_max_cwnd));
  const double b = -a / std::sqrt(p_.fs_max_cwnd);
  const double w = std::max(cwnd_, 1e-3);
  const double fs = std::clamp(a / std::sqrt(w) + b, 0.0, double(p_.fs_range_ns));
  const uint64_t base = p_.base_rtt_ns ? p_.base_rtt_ns : base_rtt_;
  return base + p_.queue_target_ns + uint64_t(fs);
}

void Swift::on_rtt(uint64_t rtt, uint64_t now) {
  if (rtt == 0) return;
  const double bits_per_rtt = double(rtt) * 1e-9 / (8.0 * p_.mss_bytes);  // packets per (bit/s)
  const double max_cwnd = p_.line_rate_bps * bits_per_rtt, min_cwnd = p_.min_rate_bps * bits_per_rtt;
  if (cwnd_ == 0) cwnd_ = rate_ * bits_per_rtt;  // the first round trip: the window the rate meant
  if (!base_rtt_ || rtt < base_rtt_) base_rtt_ = rtt;
  const uint64_t target = target_ns();
  if (rtt <= target) {
    // ai per round trip: one sample per round trip from a window of packets, one per packet
    // (each timed) below it, as the paper adds ai per ACK there.
    cwnd_ += p_.ai;
  } else if (!decreased_ || now - last_decrease_ >= rtt) {
    const double over = double(rtt - target) / double(rtt);
    cwnd_ *= std::max(1 - p_.beta * over, 1 - p_.max_mdf);
    last_decrease_ = now;
    decreased_ = true;
  }
  cwnd_ = std::clamp(cwnd_, min_cwnd, max_cwnd);
  // A window of a packet or more clocks itself by ACKs; below one, the packet is paced.
  rate_ = cwnd_ >= 1 ? p_.line_rate_bps : std::max(cwnd_ / bits_per_rtt, p_.min_rate_bps);
}

}  // namespace uroce::cc

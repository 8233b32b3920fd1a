// A QP's pacer: packets leave at the rate its congestion control (or its rate limit) allows,
// one after another. Time is an argument; a packet that finds the pacer idle leaves at once.
// Idle time earns credit for a later burst of at most burst_ns of the rate's time (a token
// bucket that deep; none by default).
#pragma once
#include <algorithm>
#include <cstdint>

namespace uroce::cc {

class Pacer {
 public:
  // When a packet of `bytes` may leave, at `rate_bps`, asked at `now`; it is then booked.
  uint64_t book(uint32_t bytes, double rate_bps, uint64_t now, uint64_t burst_ns = 0) {
    const uint64_t from = std::max(now > burst_ns ? now - burst_ns : 0, free_at_);
    free_at_ = from + uint64_t(double(bytes) * 8e9 / rate_bps + 0.5);
    return std::max(from, now);
  }
  // When the next packet could leave.
  uint64_t free_at() const { return free_at_; }

 private:
  uint64_t free_at_ = 0;
};

}  // namespace uroce::cc

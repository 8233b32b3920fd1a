// A QP's pacer: packets leave at the rate its congestion control allows, one after another,
// not in bursts. Time is an argument; a packet that finds the pacer idle leaves at once, and
// idle time earns no credit for a later burst.
#pragma once
#include <algorithm>
#include <cstdint>

namespace uroce::cc {

class Pacer {
 public:
  // When a packet of `bytes` may leave, at `rate_bps`, asked at `now`; it is then booked.
  uint64_t book(uint32_t bytes, double rate_bps, uint64_t now) {
    const uint64_t at = std::max(now, free_at_);
    free_at_ = at + uint64_t(double(bytes) * 8e9 / rate_bps + 0.5);
    return at;
  }
  // When the next packet could leave.
  uint64_t free_at() const { return free_at_; }

 private:
  uint64_t free_at_ = 0;
};

}  // namespace uroce::cc

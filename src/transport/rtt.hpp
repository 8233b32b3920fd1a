// Round-trip time of a QP (RC): one new request at a time is timed from its send to the answer
// that covers it (an ACK, or a response); a resend makes a sample ambiguous, so going back
// cancels the timing (Karn's rule). Smoothed as TCP does, 1/8 per sample. Congestion control
// (TIMELY, Swift) takes each sample; recovery (selective repeat's probe) the smoothed value.
#pragma once
#include <cstdint>
#include <optional>

#include "wire/psn.hpp"

namespace uroce::transport {

class RttEstimator {
 public:
  // A new request at psn left now; it is timed if none is.
  void on_send(wire::Psn psn, uint64_t now) {
    if (timing_) return;
    timing_ = true;
    psn_ = psn;
    sent_at_ = now;
  }
  // Everything before una is answered: the sample, if the timed request is among it.
  std::optional<uint64_t> on_ack(wire::Psn una, uint64_t now) {
    if (!timing_ || !(psn_ < una)) return std::nullopt;
    timing_ = false;
    const uint64_t rtt = now - sent_at_;
    srtt_ = srtt_ ? (7 * srtt_ + rtt) / 8 : rtt;
    return rtt;
  }
  void on_retransmit() { timing_ = false; }
  uint64_t srtt_ns() const { return srtt_; }  // 0: no sample yet

 private:
  bool timing_ = false;
  wire::Psn psn_;
  uint64_t sent_at_ = 0;
  uint64_t srtt_ = 0;
};

}  // namespace uroce::transport

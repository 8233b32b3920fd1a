// A QP's timers, one table (after quinn-proto's TimerTable): each is a deadline in the protocol
// core's clock or 0 (stopped). The core keeps one heap entry per QP, at next().
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>

namespace uroce::transport {

enum class QpTimer : uint8_t {
  Retransmit,  // the transport timer (IBA 9.7.6.1.3): `timeout` after the last progress, retry_cnt
  Probe,       // selective repeat's tail-loss probe, before the transport timer (back-off)
  Rnr,         // an RNR NAK's back-off: the requester sends nothing before it
  Pace,        // the pacer holds the next packet until then
  kCount,
};

class TimerTable {
 public:
  void set(QpTimer t, uint64_t at) { at_[size_t(t)] = at; }
  void stop(QpTimer t) { at_[size_t(t)] = 0; }
  uint64_t get(QpTimer t) const { return at_[size_t(t)]; }
  bool armed(QpTimer t) const { return at_[size_t(t)] != 0; }
  bool expired(QpTimer t, uint64_t now) const { return armed(t) && at_[size_t(t)] <= now; }
  void clear() { at_.fill(0); }
  // The earliest deadline armed; 0 if none.
  uint64_t next() const {
    uint64_t n = 0;
    for (uint64_t a : at_)
      if (a && (!n || a < n)) n = a;
    return n;
  }

 private:
  std::array<uint64_t, size_t(QpTimer::kCount)> at_{};
};

}  // namespace uroce::transport

// 24-bit packet sequence numbers with serial-number comparison (IBA 9.7.1: PSN space wraps).
#pragma once
#include <cstdint>

namespace uroce::wire {

class Psn {
 public:
  static constexpr uint32_t kMask = 0xFFFFFF;
  static constexpr uint32_t kHalf = 0x800000;

  constexpr Psn() = default;
  constexpr explicit Psn(uint32_t v) : v_(v & kMask) {}
  constexpr uint32_t value() const { return v_; }

  constexpr Psn operator+(uint32_t n) const { return Psn(v_ + n); }
  constexpr Psn operator-(uint32_t n) const { return Psn(v_ - n); }
  Psn& operator+=(uint32_t n) { v_ = (v_ + n) & kMask; return *this; }
  // Forward distance from b to a, modulo 2^24.
  static constexpr uint32_t distance(Psn from, Psn to) { return (to.v_ - from.v_) & kMask; }
  // Signed distance a - b in (-2^23, 2^23].
  static constexpr int32_t diff(Psn a, Psn b) {
    uint32_t d = (a.v_ - b.v_) & kMask;
    return d & kHalf ? int32_t(d) - int32_t(kMask + 1) : int32_t(d);
  }

  constexpr bool operator==(const Psn&) const = default;
  friend constexpr bool operator<(Psn a, Psn b) { return diff(a, b) < 0; }
  friend constexpr bool operator>(Psn a, Psn b) { return diff(a, b) > 0; }
  friend constexpr bool operator<=(Psn a, Psn b) { return diff(a, b) <= 0; }
  friend constexpr bool operator>=(Psn a, Psn b) { return diff(a, b) >= 0; }

 private:
  uint32_t v_ = 0;
};

// Message sequence number (IBA 9.7.5.1.4, carried in the AETH): the responder's count of
// completed messages, 24 bits, wrapping.
class Msn {
 public:
  constexpr Msn() = default;
  constexpr explicit Msn(uint32_t v) : v_(v & Psn::kMask) {}
  constexpr uint32_t value() const { return v_; }
  Msn& operator++() {
    v_ = (v_ + 1) & Psn::kMask;
    return *this;
  }
  constexpr bool operator==(const Msn&) const = default;

 private:
  uint32_t v_ = 0;
};

}  // namespace uroce::wire

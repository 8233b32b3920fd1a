// Typed 32-bit identifiers. QPNs, PD handles, lkeys and rkeys are all uint32_t on the wire and
// in the verbs ABI; inside the NIC each has its own type, so passing an rkey where an lkey is
// checked, or a QPN as a PD, does not compile. Conversions happen where the value enters or
// leaves: packet headers, work requests, the public API.
#pragma once
#include <compare>
#include <cstdint>
#include <functional>

namespace uroce::verbs {

template <class Tag>
class Id {
 public:
  constexpr Id() = default;
  constexpr explicit Id(uint32_t v) : v_(v) {}
  constexpr uint32_t value() const { return v_; }
  friend constexpr bool operator==(Id, Id) = default;
  friend constexpr auto operator<=>(Id, Id) = default;

 private:
  uint32_t v_ = 0;
};

using Qpn = Id<struct QpnTag>;       // 24 bits on the wire (BTH DestQP)
using PdHandle = Id<struct PdTag>;   // never on the wire: the PD an access must match
using Lkey = Id<struct LkeyTag>;     // local SGEs
using Rkey = Id<struct RkeyTag>;     // RETH and AtomicETH

}  // namespace uroce::verbs

template <class Tag>
struct std::hash<uroce::verbs::Id<Tag>> {
  size_t operator()(uroce::verbs::Id<Tag> id) const noexcept { return std::hash<uint32_t>{}(id.value()); }
};

// How an RC QP recovers lost packets: go-back-N (standard RoCE: resend everything from the
// first loss) or selective repeat (the responder keeps what arrives past a hole and says so;
// the requester resends only the holes). A QP set to selective repeat announces it on every
// request and uses it only with a responder that answers in kind; toward any other peer it is
// go-back-N, so the setting is safe with rxe and hardware NICs.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace uroce::transport {

enum class Reliability : uint8_t { Gbn, Sr };

constexpr std::string_view to_string(Reliability r) { return r == Reliability::Sr ? "sr" : "gbn"; }

inline std::optional<Reliability> parse_reliability(std::string_view s) {
  if (s == "gbn") return Reliability::Gbn;
  if (s == "sr") return Reliability::Sr;
  return std::nullopt;
}

}  // namespace uroce::transport

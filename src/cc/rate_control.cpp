#include "cc/rate_control.hpp"

#include <array>
#include <utility>

#include "cc/dcqcn.hpp"
#include "cc/swift.hpp"
#include "cc/timely.hpp"

namespace uroce::cc {

namespace {
constexpr std::array<std::pair<Algo, std::string_view>, 4> kNames = {
    {{Algo::None, "none"}, {Algo::Dcqcn, "dcqcn"}, {Algo::Timely, "timely"}, {Algo::Swift, "swift"}}};
}  // namespace

bool parse_algo(std::string_view name, Algo& out) {
  for (const auto& [a, n] : kNames)
    if (n == name) {
      out = a;
      return true;
    }
  return false;
}

std::string_view to_string(Algo a) {
  for (const auto& [b, n] : kNames)
    if (a == b) return n;
  return "?";
}

std::unique_ptr<RateControl> make_rate_control(Algo a, bool acked, const DcqcnParams& dcqcn,
                                               const TimelyParams& timely, const SwiftParams& swift) {
  if (needs_round_trips(a) && !acked) return nullptr;
  switch (a) {
    case Algo::Dcqcn: return std::make_unique<DcqcnRp>(dcqcn);
    case Algo::Timely: return std::make_unique<Timely>(timely);
    case Algo::Swift: return std::make_unique<Swift>(swift);
    case Algo::None: break;
  }
  return nullptr;
}

}  // namespace uroce::cc

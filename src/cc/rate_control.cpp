#include "cc/rate_control.hpp"

#include <array>
#include <utility>

#include "cc/dcqcn.hpp"
#include "cc/swift.hpp"
#include "cc/timely.hpp"

namespace uroce::cc {

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

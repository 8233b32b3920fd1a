#include "cc/rate_control.hpp"

namespace uroce::cc {

bool parse_algo(std::string_view name, Algo& out) {
  if (name == "none") out = Algo::None;
  else if (name == "dcqcn") out = Algo::Dcqcn;
  else if (name == "timely") out = Algo::Timely;
  else if (name == "swift") out = Algo::Swift;
  else return false;
  return true;
}

std::string_view to_string(Algo a) {
  switch (a) {
    case Algo::None: return "none";
    case Algo::Dcqcn: return "dcqcn";
    case Algo::Timely: return "timely";
    case Algo::Swift: return "swift";
  }
  return "?";
}

}  // namespace uroce::cc
